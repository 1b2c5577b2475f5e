-- schedule_advance: materialize schedule N's next occurrence as an ordinary
-- delayed task, and advance the schedule to it -- only if no other scheduler
-- did so first (compare-and-set on the occurrence the caller saw).
--
-- A scheduler calls it when N's current occurrence is due (its score in the
-- schedules zset <= now): it reads the definition, computes the following
-- occurrence in its own code (cron, time zone, catch-up) from the Redis
-- clock, and passes what it saw.  Any number of schedulers may race: the
-- first call moves next_ms on and every other one finds next_ms changed and
-- writes nothing, so each occurrence is enqueued exactly once.
--
-- KEYS[1]  {ns}:schedules   zset name -> due time of the next occurrence
-- KEYS[2]  {ns}:types       set of task types
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  N, the schedule name
-- ARGV[3]  rev the caller read (a changed definition bumps it)
-- ARGV[4]  next_ms the caller read: the occurrence being replaced ("0" = none yet)
-- ARGV[5]  the new occurrence, unix ms (> ARGV[4]); "-1" = the definition
--          cannot be computed: store ARGV[6] as its error and park the
--          schedule (score +inf) until it is replaced
-- ARGV[6]  the error text (with ARGV[5] = -1)
--
-- The occurrence is the schedule's task template with "id" =
-- "schedule.N.<ms>", "schedule" = N, "occurrence_ms" and "enqueued_ms"
-- appended, ZADDed to delayed:T at <ms>; stats "enqueued" +1; the
-- scheduler wake token when it is the type's new earliest.  The schedule's
-- next_ms becomes <ms>, last_ms the replaced one, occurrences +1.
--
-- Returns {1, new next_ms} or {0, reason}: "missing", "moved" (another
-- scheduler advanced it, or the definition changed), "paused", "error".
--
-- Errors: `schedule <N>: the next occurrence must be later than <ARGV[4]>`

local prefix, name = ARGV[1], ARGV[2]
local seen_rev, seen_next, new_next = ARGV[3], ARGV[4], tonumber(ARGV[5])
--! include lib/clock.lua

--! include lib/stamp.lua

local skey = prefix .. 'schedule:' .. name
local cur = redis.call('HMGET', skey, 'rev', 'next_ms', 'paused', 'type', 'task')
if not cur[1] then
    return {0, 'missing'}
end
if cur[1] ~= seen_rev or cur[2] ~= seen_next then
    return {0, 'moved'}
end
if cur[3] == '1' then
    return {0, 'paused'}
end
if new_next == nil or new_next < 0 then
    redis.call('HSET', skey, 'error', ARGV[6])
    redis.call('ZADD', KEYS[1], '+inf', name)
    return {0, 'error'}
end
if new_next <= tonumber(seen_next) then
    return redis.error_reply('schedule ' .. name .. ': the next occurrence must be later than ' .. seen_next)
end

local ttype, task = cur[4], cur[5]
local at = string.format('%d', new_next)
local env = stamp_json(task, 'id', '"schedule.' .. name .. '.' .. at .. '"')
env = stamp_json(env, 'schedule', '"' .. name .. '"')
env = stamp_json(env, 'occurrence_ms', at)
env = stamp_json(env, 'enqueued_ms', string.format('%d', now))

local dkey = prefix .. 'delayed:' .. ttype
local before = redis.call('ZRANGE', dkey, 0, 0, 'WITHSCORES')
redis.call('ZADD', dkey, new_next, env)
redis.call('SADD', KEYS[2], ttype)
redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'enqueued', 1)
if before[2] == nil or tonumber(before[2]) > new_next then
    redis.call('RPUSH', prefix .. 'wake:scheduler', '1')
    redis.call('LTRIM', prefix .. 'wake:scheduler', -64, -1)
end
redis.call('HSET', skey, 'next_ms', at, 'last_ms', seen_next)
redis.call('HINCRBY', skey, 'occurrences', 1)
redis.call('ZADD', KEYS[1], new_next, name)
return {1, new_next}
