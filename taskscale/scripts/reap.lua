-- reap: for every worker whose lease expired (its heartbeat stopped: killed,
-- crashed, partitioned), return each of its in-flight tasks to the HEAD of
-- its ready list, fix ACTIVE_TASKS, and forget the worker.  Atomic per call,
-- so any number of reapers may run at once: a worker is reaped exactly once.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:workers       zset W -> lease expiry (unix ms)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  most workers to reap in this call
--
-- Each returned envelope gets "reaped" (times its worker died while running
-- it) appended as its last field; the worker dead-letters a task reaped too
-- often instead of running it again (a poison pill that kills every worker).
--
-- Returns {workers reaped, tasks requeued, more (1 if the batch was full)}.

local prefix = ARGV[1]
local limit = tonumber(ARGV[2]) or 100
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Append "field":value as the envelope's last member (a JSON decoder keeps
-- the last of duplicate keys); never re-encode, which would turn [] into {}.
local function stamp(env, field, value)
    local pos = #env
    while pos > 0 and string.sub(env, pos, pos) ~= '}' do
        pos = pos - 1
    end
    return string.sub(env, 1, pos - 1) .. ',"' .. field .. '":' .. string.format('%d', value) .. '}'
end

local function back_to_head(env)
    local ok, doc = pcall(cjson.decode, env)
    local ttype, level, reaped = nil, 5, 1
    if ok and type(doc) == 'table' then
        ttype = doc.type
        local p = doc.priority
        if type(p) == 'number' and p == math.floor(p) and p >= 0 and p <= 9 then
            level = p
        end
        if type(doc.reaped) == 'number' and doc.reaped >= 0 then
            reaped = math.floor(doc.reaped) + 1
        end
    end
    if type(ttype) ~= 'string' then
        return 0
    end
    env = stamp(env, 'reaped', reaped)
    local qkey = prefix .. 'q:' .. ttype .. ':' .. level
    if redis.call('LPUSH', qkey, env) == 1 then
        redis.call('PUBLISH', prefix .. 'demand', ttype)
    end
    local skey = prefix .. 'stats:' .. ttype
    local left = redis.call('HINCRBY', KEYS[1], ttype, -1)
    if left < 0 then
        redis.call('HSET', KEYS[1], ttype, 0)
        redis.call('HINCRBY', skey, 'active_underflow', -left)
    end
    redis.call('HINCRBY', skey, 'requeued', 1)
    redis.call('RPUSH', prefix .. 'wake:' .. ttype, '1')
    redis.call('LTRIM', prefix .. 'wake:' .. ttype, -64, -1)
    return 1
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. now, 'LIMIT', 0, limit)
local tasks = 0
for _, worker in ipairs(expired) do
    local ikey = prefix .. 'inflight:' .. worker
    local all = redis.call('HGETALL', ikey)
    for i = 2, #all, 2 do
        tasks = tasks + back_to_head(all[i])
    end
    redis.call('DEL', ikey, prefix .. 'worker:' .. worker)
    redis.call('ZREM', KEYS[2], worker)
end
local more = 0
if #expired == limit then
    more = 1
end
return {#expired, tasks, more}
