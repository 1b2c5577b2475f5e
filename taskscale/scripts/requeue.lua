-- requeue: return in-flight tasks of worker W to the HEAD of their ready
-- lists (graceful shutdown, or tasks W claimed but never learned about after
-- a lost reply).  Each task acts only if it is still in W's in-flight hash.
-- With the "final" flag it takes every in-flight task of W and deregisters W
-- in the same step, so W can claim nothing afterwards.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:workers       zset W -> lease expiry
-- KEYS[3]  {ns}:inflight:W    hash task id -> envelope
-- KEYS[4]  {ns}:worker:W      registry record
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  W
-- ARGV[3]  "final" (all tasks, then deregister W) or "some"
-- ARGV[4..] task ids (with "some")
--
-- Returns the number of tasks returned to their queues.

local prefix, worker, mode = ARGV[1], ARGV[2], ARGV[3]

local function back_to_head(id, env)
    local ok, doc = pcall(cjson.decode, env)
    local ttype, level = nil, 5
    if ok and type(doc) == 'table' then
        ttype = doc.type
        local p = doc.priority
        if type(p) == 'number' and p == math.floor(p) and p >= 0 and p <= 9 then
            level = p
        end
    end
    if type(ttype) ~= 'string' then
        return 0
    end
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

local moved = 0
if mode == 'final' then
    local all = redis.call('HGETALL', KEYS[3])
    for i = 1, #all, 2 do
        moved = moved + back_to_head(all[i], all[i + 1])
    end
    redis.call('DEL', KEYS[3], KEYS[4])
    redis.call('ZREM', KEYS[2], worker)
else
    for i = 4, #ARGV do
        local env = redis.call('HGET', KEYS[3], ARGV[i])
        if env then
            redis.call('HDEL', KEYS[3], ARGV[i])
            moved = moved + back_to_head(ARGV[i], env)
        end
    end
end
return moved
