-- Withdraw a schedule's pending occurrence, shared by schedule_add.lua (a
-- changed definition) and schedule_control.lua (pause, remove); inlined by
-- the include directive of luascripts.py.  The including script defines
-- `prefix` ("{ns}:").
--
-- schedule_unpend(skey, name): if the occurrence the schedule materialized
-- (its next_ms) is still in delayed:T, ZREM it and count it in stats
-- "withdrawn" (not "cancelled": nobody cancelled a task; the schedule
-- changed).  An occurrence already promoted (ready or running) is left
-- alone: it is an ordinary task by then.  Returns 1 if one was removed.
local function schedule_unpend(skey, name)
    local f = redis.call('HMGET', skey, 'type', 'next_ms')
    local ttype, next_ms = f[1], f[2]
    if not ttype or not next_ms or next_ms == '0' then
        return 0
    end
    local dkey = prefix .. 'delayed:' .. ttype
    local needle = '"id":"schedule.' .. name .. '.' .. next_ms .. '"'
    for _, env in ipairs(redis.call('ZRANGEBYSCORE', dkey, next_ms, next_ms)) do
        if string.find(env, needle, 1, true) then
            redis.call('ZREM', dkey, env)
            redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'withdrawn', 1)
            return 1
        end
    end
    return 0
end
