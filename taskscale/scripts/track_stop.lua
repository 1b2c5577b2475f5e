-- track_stop: a tracked process P finished task X of type T (returned or
-- raised).  The seed's stop_task, made safe: X counts down only if P's
-- in-flight hash still held it (a repeated call, or a stop after a peer
-- reaped P, counts nothing), ACTIVE_TASKS never goes below 0, and IDLE_SINCE
-- is the Redis clock, not P's.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS         hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:IDLE_SINCE           hash T -> unix seconds the last task finished
-- KEYS[3]  {ns}:track:inflight:P     hash X -> T
-- KEYS[4]  {ns}:stats:T              hash of T's counters
--
-- ARGV[1]  X; "" = the plain protocol (no record: always count down, floored at 0)
-- ARGV[2]  T
-- ARGV[3]  "completed" or "failed" (the stats counter to add 1 to)
-- ARGV[4]  the task's run time in ms (stats service_ms)
--
-- Returns 1 if X was counted down, 0 if it was not counted for P.  Stats
-- "active_underflow" counts decrements that would have gone below 0, as in
-- complete.lua (with record-keeping callers it stays 0).
--
-- Errors: none

local id, ttype = ARGV[1], ARGV[2]
if id ~= '' and redis.call('HDEL', KEYS[3], id) == 0 then
    return 0
end
--! inline lib/clock.lua
-- The Redis clock, read once by every script that needs the time (inlined by
-- the include directive of luascripts.py, at the place the script reads it).
-- Every time taskscale stores or compares is the server's, never a client's.
--
-- clock             the TIME reply {unix seconds, microseconds}, as strings
-- now               unix ms, whole: stamps, leases, due times, scores
-- now_exact         unix ms to the µs (claim's token buckets)
-- seconds_text(ms)  unix seconds with ms precision, "%d.%03d" (IDLE_SINCE)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_exact = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000

local function seconds_text(ms)
    return string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
end
--! end inline
local left = redis.call('HINCRBY', KEYS[1], ttype, -1)
if left < 0 then
    redis.call('HSET', KEYS[1], ttype, 0)
    redis.call('HINCRBY', KEYS[4], 'active_underflow', -left)
end
redis.call('HSET', KEYS[2], ttype, seconds_text(now))
local outcome = 'completed'
if ARGV[3] == 'failed' then
    outcome = 'failed'
end
redis.call('HINCRBY', KEYS[4], outcome, 1)
redis.call('HINCRBY', KEYS[4], 'service_ms', math.max(0, math.floor(tonumber(ARGV[4]) or 0)))
return 1
