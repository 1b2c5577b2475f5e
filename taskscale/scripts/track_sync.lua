-- track_sync: the heartbeat of tracked process P, and the reaper of its peers.
--
-- 1. P's in-flight hash is made equal to the tasks P says it runs now (ARGV
--    pairs): a task P holds but the hash lacks (its track_start reply was lost,
--    or P was reaped while alive but slow) is counted up again; a task the hash
--    holds but P does not (its track_stop was lost) is counted down.  So the
--    counts follow what runs, whatever calls failed before.
-- 2. P's lease is renewed (and its pod recorded) -- or, with a lease <= 0, P
--    leaves: everything it held is counted down and its records are dropped.
-- 3. Every process whose lease expired (killed, crashed, partitioned) is
--    reaped: its tasks are counted down (ACTIVE_TASKS never below 0, IDLE_SINCE
--    = now) and its records dropped.  Atomic, so any number of processes may
--    reap at once: each dead process is counted down exactly once.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS         hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:IDLE_SINCE           hash T -> unix seconds the last task finished
-- KEYS[3]  {ns}:track:processes      zset P -> lease expiry (unix ms)
-- KEYS[4]  {ns}:track:pods           hash P -> its pod (optional; see ARGV[5])
--
-- ARGV[1]  key prefix "{ns}:" (in-flight hashes are prefix .. "track:inflight:" .. P,
--          stats hashes prefix .. "stats:" .. T: same hash tag as KEYS[1])
-- ARGV[2]  P ("" = reap only)
-- ARGV[3]  P's lease in ms; 0 or less = P leaves
-- ARGV[4]  most expired processes to reap in this call
-- ARGV[5..] with KEYS[4]: P's pod (POD_NAME, else its host name; "" = none),
--          then pairs X, T: the tasks P runs now (from ARGV[6] with KEYS[4], from
--          ARGV[5] without it -- the layout of callers older than the pod)
--
-- Returns {tasks counted up, tasks counted down, processes reaped}.
--
-- Errors: none

local prefix, me = ARGV[1], ARGV[2]
local pods, pod, first = prefix .. 'track:pods', '', 5
if KEYS[4] then
    pods, pod, first = KEYS[4], ARGV[5], 6
end
local lease, limit = tonumber(ARGV[3]), tonumber(ARGV[4]) or 100
--! inline lib/clock.lua
-- The Redis clock, read once by every script that needs the time (inlined by
-- the include directive of luascripts.py, at the place the script reads it).
-- Every time taskscale stores or compares is the server's, never a client's.
--
-- clock             the TIME reply {unix seconds, microseconds}, as strings
-- now               unix ms, whole: stamps, leases, due times, scores
-- now_exact         unix ms to the µs (claim's token buckets)
-- seconds_text(ms)  unix seconds with ms precision, "%d.%03d" (IDLE_SINCE)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_exact = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000

local function seconds_text(ms)
    return string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
end
--! end inline
local idle = seconds_text(now)
local up, down = 0, 0

local function count_down(ttype)
    local left = redis.call('HINCRBY', KEYS[1], ttype, -1)
    if left < 0 then
        redis.call('HSET', KEYS[1], ttype, 0)
        redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'active_underflow', -left)
    end
    redis.call('HSET', KEYS[2], ttype, idle)
    down = down + 1
end

local function drop(process)
    local ikey = prefix .. 'track:inflight:' .. process
    local all = redis.call('HGETALL', ikey)
    for i = 2, #all, 2 do
        count_down(all[i])
    end
    redis.call('DEL', ikey)
    redis.call('ZREM', KEYS[3], process)
    redis.call('HDEL', pods, process)
end

if me ~= '' then
    if lease <= 0 then
        drop(me)
    else
        local ikey = prefix .. 'track:inflight:' .. me
        local held = {}
        for i = first, #ARGV - 1, 2 do
            held[ARGV[i]] = ARGV[i + 1]
            if redis.call('HSETNX', ikey, ARGV[i], ARGV[i + 1]) == 1 then
                redis.call('HINCRBY', KEYS[1], ARGV[i + 1], 1)
                up = up + 1
            end
        end
        local all = redis.call('HGETALL', ikey)
        for i = 1, #all, 2 do
            if held[all[i]] == nil then
                redis.call('HDEL', ikey, all[i])
                count_down(all[i + 1])
            end
        end
        redis.call('ZADD', KEYS[3], now + lease, me)
        if pod ~= '' then
            redis.call('HSET', pods, me, pod)
        end
    end
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now, 'LIMIT', 0, limit)
for _, process in ipairs(expired) do
    drop(process)
end
return {up, down, #expired}
