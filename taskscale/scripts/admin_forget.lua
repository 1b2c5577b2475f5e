-- admin_forget: forget task type T (enqueued once by mistake, or retired):
-- remove it from the types set and delete its stats, idle clock, wake list
-- and dead letters, so status, the scheduler and the controller no longer
-- list it.  Refused while T has work: ready or delayed tasks (unless forced:
-- then they are deleted too) or running tasks (always refused: their
-- outcomes would re-create the type's counters).
--
-- KEYS[1]  {ns}:types          set of task types
-- KEYS[2]  {ns}:ACTIVE_TASKS   hash T -> tasks running now
-- KEYS[3]  {ns}:IDLE_SINCE     hash T -> when the last task finished
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  T
-- ARGV[3]  "force" to delete ready and delayed tasks too, else ""
--
-- Returns {forgotten (1/0), queued, delayed, running} as found before.
-- admin.forget_type(force=True) first empties the queues with admin_purge
-- (which finishes fan-outs and releases unique keys), then calls this with
-- "force" to delete what a producer added in between.
--
-- Errors: none

local prefix, ttype, force = ARGV[1], ARGV[2], ARGV[3] == 'force'
local queues = {}
local queued = 0
for level = 0, 9 do
    queues[#queues + 1] = prefix .. 'q:' .. ttype .. ':' .. level
    queued = queued + redis.call('LLEN', queues[#queues])
end
local delayed = redis.call('ZCARD', prefix .. 'delayed:' .. ttype)
local running = tonumber(redis.call('HGET', KEYS[2], ttype) or '0') or 0
if running > 0 or ((queued > 0 or delayed > 0) and not force) then
    return {0, queued, delayed, running}
end
redis.call('DEL', prefix .. 'delayed:' .. ttype, prefix .. 'stats:' .. ttype,
    prefix .. 'wake:' .. ttype, prefix .. 'dead:' .. ttype, unpack(queues))
redis.call('SREM', KEYS[1], ttype)
redis.call('HDEL', KEYS[2], ttype)
redis.call('HDEL', KEYS[3], ttype)
redis.call('HDEL', prefix .. 'QUEUED', ttype)
return {1, queued, delayed, running}
