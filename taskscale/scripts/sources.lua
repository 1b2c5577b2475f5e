#!lua flags=no-writes
-- sources: the demand of task types whose work is not in taskscale's queues --
-- Celery (kombu's Redis transport), RQ, plain Redis lists -- in one read-only
-- call on the Redis clock (used by taskscale.controller.sources).  Missing
-- keys read as empty.  The keys are not in one hash slot: a single Redis only.
--
-- KEYS[1]  ACTIVE_TASKS hash (task name -> running)
-- KEYS[2]  IDLE_SINCE hash (task name -> unix seconds)
-- KEYS[3..] kombu's unacked hash first, when ARGV[1] > 0 (delivery tag ->
--          JSON [message, exchange, routing key]);
--          then, per type in ARGV's order: its lists, its running-job zsets, its
--          scheduled-job zsets (counts in ARGV), and the stats hash of each of its
--          task names (T of them, in the order of the names);
--          then, when the tracked-process limit (below) is above 0: the tracking
--          protocol's process zset ({ns}:track:processes) and pod hash ({ns}:track:pods).
--
-- ARGV[1]  S, the most unacked entries to read (0: no KEYS[3]).  A larger
--          hash is sampled: S entries (HRANDFIELD), each routing key's count
--          scaled by size / S -- an estimate that bounds the time the script
--          holds Redis (every entry is a whole message, kilobytes).
-- ARGV[2..] n, the number of types; then per type:
--          L, S, D (lists, running zsets, scheduled zsets: the next L+S+D KEYS),
--          lead ms (look-ahead window of the scheduled zsets),
--          R then R routing keys (its unacked messages are counted),
--          T then T task names (ACTIVE_TASKS / IDLE_SINCE fields; their
--          stats hashes are the type's last T KEYS)
--          then P, the most tracked processes to read (0: none), and the key
--          prefix "{ns}:" of their in-flight hashes (prefix .. "track:inflight:" .. X)
--
-- Zset scores are unix seconds (RQ's registries).
-- Returns {seconds, microseconds, rows[n]}, a row per type:
--   {queued (sum of LLEN), reserved (unacked with a listed routing key),
--    running (members of the running zsets not yet expired: score > now),
--    due (scheduled, score <= now), upcoming (now < score <= now + lead),
--    active (sum of the task names' ACTIVE_TASKS, each at least 0),
--    idle since (the latest IDLE_SINCE of the task names, a string; false if none),
--    then the task names' stats counters summed: claimed, completed, failed, service_ms}
-- and processes: {X, pod (X when none is recorded), {task names it runs now}}
-- for every tracked process X whose lease is live and that runs a task (at
-- most P live processes are looked at, soonest-expiring lease first).
--
-- Errors: none

--! include lib/clock.lua
local now_s = tonumber(clock[1]) + tonumber(clock[2]) / 1e6  -- RQ's scores are unix seconds
local now_text = string.format('%.6f', now_s)

local at = 0
local function take()
    at = at + 1
    return ARGV[at]
end

local sample = tonumber(take())
local with_unacked = sample > 0
local next_key = with_unacked and 4 or 3
local function key()
    next_key = next_key + 1
    return KEYS[next_key - 1]
end

-- The routing key of one unacked entry: the JSON array's last string.  Read
-- from the tail (a message is kilobytes; decoding each whole cost 10x more),
-- decoded in full only when the tail does not end in a plain JSON string.
local function routing_key(raw)
    local key = string.match(string.sub(raw, -512), ',%s*"([^"\\]*)"%s*%]%s*$')
    if key then
        return key
    end
    local ok, doc = pcall(cjson.decode, raw)
    if ok and type(doc) == 'table' and type(doc[3]) == 'string' then
        return doc[3]
    end
    return nil
end

-- Unacked messages per routing key, one pass over the hash for every type.
local unacked = {}
local size = with_unacked and redis.call('HLEN', KEYS[3]) or 0
if size > 0 then
    local values, scale
    if size <= sample then
        values, scale = redis.call('HVALS', KEYS[3]), 1
    else
        values = {}
        local pairs_ = redis.call('HRANDFIELD', KEYS[3], sample, 'WITHVALUES')
        for j = 2, #pairs_, 2 do
            values[#values + 1] = pairs_[j]
        end
        scale = size / #values
    end
    for _, raw in ipairs(values) do
        local key = routing_key(raw)
        if key then
            unacked[key] = (unacked[key] or 0) + scale
        end
    end
end

local rows = {}
local n = tonumber(take())
for i = 1, n do
    local lists, started, scheduled = tonumber(take()), tonumber(take()), tonumber(take())
    local lead = tonumber(take()) / 1000
    local queued, reserved, running, due, upcoming, active = 0, 0, 0, 0, 0, 0
    local idle = nil
    for _ = 1, lists do
        queued = queued + redis.call('LLEN', key())
    end
    for _ = 1, started do
        running = running + redis.call('ZCOUNT', key(), '(' .. now_text, '+inf')
    end
    for _ = 1, scheduled do
        local zset = key()
        due = due + redis.call('ZCOUNT', zset, '-inf', now_text)
        upcoming = upcoming
            + redis.call('ZCOUNT', zset, '(' .. now_text, string.format('%.6f', now_s + lead))
    end
    for _ = 1, tonumber(take()) do
        reserved = reserved + (unacked[take()] or 0)
    end
    reserved = math.floor(reserved + 0.5)
    local tasks = {}
    for j = 1, tonumber(take()) do
        tasks[j] = take()
    end
    if #tasks > 0 then
        for _, value in ipairs(redis.call('HMGET', KEYS[1], unpack(tasks))) do
            active = active + math.max(0, tonumber(value) or 0)
        end
        for _, value in ipairs(redis.call('HMGET', KEYS[2], unpack(tasks))) do
            local since = tonumber(value)
            if since and (idle == nil or since > tonumber(idle)) then
                idle = value
            end
        end
    end
    local row = {queued, reserved, running, due, upcoming, active, idle or false, 0, 0, 0, 0}
    for _ = 1, #tasks do
        local counters = redis.call('HMGET', key(), 'claimed', 'completed', 'failed', 'service_ms')
        for j = 1, 4 do
            row[7 + j] = row[7 + j] + (tonumber(counters[j]) or 0)
        end
    end
    rows[i] = row
end

local processes = {}
local most = tonumber(take() or '0')
if most > 0 then
    local zset, pods, prefix = key(), key(), take()
    local live = redis.call('ZRANGEBYSCORE', zset, now, '+inf', 'LIMIT', 0, most)
    for _, process in ipairs(live) do
        local names = redis.call('HVALS', prefix .. 'track:inflight:' .. process)
        if #names > 0 then
            local pod = redis.call('HGET', pods, process)
            processes[#processes + 1] = {process, pod or process, names}
        end
    end
end

return {clock[1], clock[2], rows, processes}
