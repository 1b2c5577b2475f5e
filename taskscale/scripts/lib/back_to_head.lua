-- Return one in-flight task to the HEAD of its own ready list, shared by
-- reap.lua (dead workers) and requeue.lua (graceful shutdown); inlined by
-- the include directive of luascripts.py. The including script defines
-- `prefix` ("{ns}:") and passes {ns}:ACTIVE_TASKS as KEYS[1].
--
-- back_to_head(env, count_reap): LPUSH the envelope onto q:T:P (its own
-- priority level), ACTIVE_TASKS[T] - 1 (never below 0; an underflow is
-- counted in stats "active_underflow"), stats "requeued", a wake token, and
-- the demand signal when the list was empty. With count_reap the envelope
-- gets "reaped" (times its worker died running it) appended as its last
-- member -- appended, never re-encoded, which would turn [] into {}.
-- Returns 1, or 0 for an envelope without a type (claim never records one).

--! include lib/stamp.lua
--! include lib/wake_cap.lua
--! include lib/queued.lua

local function back_to_head(env, count_reap)
    local ok, doc = pcall(cjson.decode, env)
    local ttype, level, reaped = nil, 5, 1
    if ok and type(doc) == 'table' then
        ttype = doc.type
        local p = doc.priority
        if type(p) == 'number' and p == math.floor(p) and p >= 0 and p <= 9 then
            level = p
        end
        if type(doc.reaped) == 'number' and doc.reaped >= 0 and doc.reaped < 2^53 then
            reaped = math.floor(doc.reaped) + 1
        end
    end
    if type(ttype) ~= 'string' then
        return 0
    end
    if count_reap then
        env = stamp_json(env, 'reaped', string.format('%d', reaped))
    end
    local qkey = prefix .. 'q:' .. ttype .. ':' .. level
    count_queued(ttype, 1)
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
    redis.call('LTRIM', prefix .. 'wake:' .. ttype, -WAKE_CAP, -1)
    return 1
end
