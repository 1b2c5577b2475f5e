-- requeue: return in-flight tasks of worker W to the HEAD of their ready
-- lists (graceful shutdown, or tasks W claimed but never learned about after
-- a lost reply).  Each task acts only if it is still in W's in-flight hash.
-- With the "final" flag it takes every in-flight task of W and deregisters W
-- in the same step, so W can claim nothing afterwards.  "dead" does the same
-- for a W known to have died (a supervisor saw its child process exit): like
-- reap.lua, each envelope gets its "reaped" count raised, so a task that
-- kills every process running it is dead-lettered after --max-lost deaths.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:workers       zset W -> lease expiry
-- KEYS[3]  {ns}:inflight:W    hash task id -> envelope
-- KEYS[4]  {ns}:worker:W      registry record
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  W
-- ARGV[3]  "final" (all tasks, then deregister W), "dead" (the same, counting
--          a death on each task) or "some"
-- ARGV[4..] task ids (with "some")
--
-- Returns the number of tasks returned to their queues.  A key of KEYS of
-- the wrong type is the error "BADKEY <key> ..." before any write.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix, worker, mode = ARGV[1], ARGV[2], ARGV[3]

--! include lib/back_to_head.lua
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4], 'hash'})
if bad then
    return bad
end

local moved = 0
if mode == 'final' or mode == 'dead' then
    local all = redis.call('HGETALL', KEYS[3])
    for i = 1, #all, 2 do
        moved = moved + back_to_head(all[i + 1], mode == 'dead')
    end
    redis.call('DEL', KEYS[3], KEYS[4])
    redis.call('ZREM', KEYS[2], worker)
else
    for i = 4, #ARGV do
        local env = redis.call('HGET', KEYS[3], ARGV[i])
        if env then
            redis.call('HDEL', KEYS[3], ARGV[i])
            moved = moved + back_to_head(env, false)
        end
    end
end
return moved
