-- schedule_control: pause, resume or remove schedule N.
--
-- KEYS[1]  {ns}:schedules   zset name -> due time of the next occurrence
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  N, the schedule name
-- ARGV[3]  mode: "pause" | "resume" | "remove"
--
-- pause:  withdraw the pending occurrence (still in delayed:T; stats
--         "withdrawn"), next_ms 0, paused 1, score +inf, rev +1.
-- resume: paused 0, score 0, rev +1, wake token: a scheduler materializes
--         the next occurrence after now (time paused is not caught up).
-- remove: withdraw the pending occurrence, DEL the hash, ZREM the name.
-- An occurrence already promoted (ready or running) is not touched.
--
-- Returns "missing", "done", or "unchanged" (pause of a paused schedule,
-- resume of a running one).
--
-- Errors: `schedule_control: unknown mode <ARGV[3]>`

local prefix, name, mode = ARGV[1], ARGV[2], ARGV[3]

--! include lib/schedule_unpend.lua
--! include lib/wake_cap.lua

local skey = prefix .. 'schedule:' .. name
local paused = redis.call('HGET', skey, 'paused')
if not paused then
    return 'missing'
end
if mode == 'remove' then
    schedule_unpend(skey, name)
    redis.call('DEL', skey)
    redis.call('ZREM', KEYS[1], name)
    return 'done'
elseif mode == 'pause' then
    if paused == '1' then
        return 'unchanged'
    end
    schedule_unpend(skey, name)
    redis.call('HSET', skey, 'paused', '1', 'next_ms', '0')
    redis.call('HINCRBY', skey, 'rev', 1)
    redis.call('ZADD', KEYS[1], '+inf', name)
    return 'done'
elseif mode == 'resume' then
    if paused ~= '1' then
        return 'unchanged'
    end
    redis.call('HSET', skey, 'paused', '0', 'next_ms', '0')
    redis.call('HINCRBY', skey, 'rev', 1)
    redis.call('ZADD', KEYS[1], 0, name)
    redis.call('RPUSH', prefix .. 'wake:scheduler', '1')
    redis.call('LTRIM', prefix .. 'wake:scheduler', -WAKE_CAP, -1)
    return 'done'
end
return redis.error_reply('schedule_control: unknown mode ' .. tostring(mode))
