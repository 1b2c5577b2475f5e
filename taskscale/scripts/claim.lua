-- claim: hand up to k ready tasks to worker W, most urgent level first across
-- its types (in the order given: the caller rotates it for fairness), FIFO
-- within a level.  Each claimed envelope is recorded in W's in-flight hash
-- (its lease: the reaper returns it if W's heartbeat expires) and counted in
-- ACTIVE_TASKS, in this one script, so a crash can neither lose nor skew it.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now
-- KEYS[2]  {ns}:workers       zset W -> lease expiry (unix ms)
-- KEYS[3]  {ns}:inflight:W    hash task id -> envelope
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  W, the worker id
-- ARGV[3]  k, the most tasks to claim (the worker's free threads)
-- ARGV[4..] the task types W serves, the one to favour first
--
-- Returns {status, now_ms, T1, id1, envelope1, T2, id2, envelope2, ...}; status is
-- "ok", or "unregistered" (nothing claimed) when W holds no live lease: a
-- reaped worker must heartbeat again before it claims.
-- An envelope that does not decode, lacks an id, names another type or
-- repeats an id W already holds goes to dead:T with the reason.

local prefix, worker, k = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local lease = redis.call('ZSCORE', KEYS[2], worker)
if not lease or tonumber(lease) < now then
    return {'unregistered', now}
end

local qkeys, qtype = {}, {}
for level = 0, 9 do
    for i = 4, #ARGV do
        local key = prefix .. 'q:' .. ARGV[i] .. ':' .. level
        qkeys[#qkeys + 1] = key
        qtype[key] = ARGV[i]
    end
end

local out = {'ok', now}
local claimed, waited, deadn = {}, {}, {}

local function dead_letter(ttype, env, reason)
    redis.call('RPUSH', prefix .. 'dead:' .. ttype,
        cjson.encode({envelope = env, error = reason, failed_ms = now}))
    deadn[ttype] = (deadn[ttype] or 0) + 1
end

local function take(ttype, env)
    local ok, doc = pcall(cjson.decode, env)
    if not ok or type(doc) ~= 'table' then
        return dead_letter(ttype, env, 'envelope is not a JSON object')
    end
    if type(doc.id) ~= 'string' or doc.id == '' then
        return dead_letter(ttype, env, 'envelope has no string "id"')
    end
    if doc.type ~= ttype then
        return dead_letter(ttype, env, 'envelope "type" does not match its queue ' .. ttype)
    end
    if redis.call('HSETNX', KEYS[3], doc.id, env) == 0 then
        return dead_letter(ttype, env, 'task id ' .. doc.id .. ' is already in flight on worker ' .. worker)
    end
    local since = tonumber(doc.due_ms) or tonumber(doc.enqueued_ms) or now
    claimed[ttype] = (claimed[ttype] or 0) + 1
    waited[ttype] = (waited[ttype] or 0) + math.max(0, now - since)
    out[#out + 1] = ttype
    out[#out + 1] = doc.id
    out[#out + 1] = env
    return true
end

local lmpop = {'LMPOP', #qkeys}
for _, key in ipairs(qkeys) do
    lmpop[#lmpop + 1] = key
end
lmpop[#lmpop + 1] = 'LEFT'
lmpop[#lmpop + 1] = 'COUNT'
local count_at = #lmpop + 1

local remaining = k
while remaining > 0 do
    lmpop[count_at] = remaining
    local popped = redis.call(unpack(lmpop))
    if not popped then
        break
    end
    local ttype = qtype[popped[1]]
    for _, env in ipairs(popped[2]) do
        if take(ttype, env) == true then
            remaining = remaining - 1
        end
    end
end

for ttype, n in pairs(claimed) do
    redis.call('HINCRBY', KEYS[1], ttype, n)
    local skey = prefix .. 'stats:' .. ttype
    redis.call('HINCRBY', skey, 'claimed', n)
    redis.call('HINCRBY', skey, 'wait_ms', waited[ttype])
end
for ttype, n in pairs(deadn) do
    redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'dead', n)
end

-- Work left behind: chain-wake another idle worker of each such type.
if remaining == 0 then
    for i = 4, #ARGV do
        local keys = {}
        for level = 0, 9 do
            keys[#keys + 1] = prefix .. 'q:' .. ARGV[i] .. ':' .. level
        end
        if redis.call('EXISTS', unpack(keys)) > 0 then
            local wkey = prefix .. 'wake:' .. ARGV[i]
            redis.call('RPUSH', wkey, '1')
            redis.call('LTRIM', wkey, -64, -1)
        end
    end
end
return out
