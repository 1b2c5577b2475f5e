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
-- A key of KEYS of the wrong type is the error "BADKEY <key> ..." before any write.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix = ARGV[1]
local limit = tonumber(ARGV[2]) or 100
--! include lib/clock.lua

--! include lib/back_to_head.lua
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'hash', KEYS[2], 'zset'})
if bad then
    return bad
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. now, 'LIMIT', 0, limit)
local tasks = 0
for _, worker in ipairs(expired) do
    local ikey = prefix .. 'inflight:' .. worker
    local all = redis.call('HGETALL', ikey)
    for i = 2, #all, 2 do
        tasks = tasks + back_to_head(all[i], true)
    end
    redis.call('DEL', ikey, prefix .. 'worker:' .. worker)
    redis.call('ZREM', KEYS[2], worker)
end
local more = 0
if #expired == limit then
    more = 1
end
return {#expired, tasks, more}
