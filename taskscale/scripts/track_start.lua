-- track_start: process P, which is not a taskscale worker (a Celery or RQ
-- worker, any code under taskscale.tracking.track), starts task X of type T.
-- The seed's start_task, plus a lease: X is recorded in P's in-flight hash,
-- so if P dies before track_stop, a peer's track_sync counts X down again.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS         hash T -> tasks running now
-- KEYS[2]  {ns}:track:processes      zset P -> lease expiry (unix ms, Redis clock)
-- KEYS[3]  {ns}:track:inflight:P     hash X -> T, the tasks P runs now
-- KEYS[4]  {ns}:stats:T              hash of T's counters
-- KEYS[5]  {ns}:track:pods           hash P -> its pod name (optional: an older
--                                     caller passes 4 keys and records no pod)
--
-- ARGV[1]  X, the task id; "" = count only (the seed's plain protocol: no
--          record, no lease, so nothing can repair the count if P dies)
-- ARGV[2]  T
-- ARGV[3]  P's lease in ms (renewed by every start and every track_sync)
-- ARGV[4]  P, the process id (the member of KEYS[2])
-- ARGV[5]  P's pod (POD_NAME, else its host name), recorded in KEYS[5]
--
-- Returns 1 if X was counted, 0 if P had already counted X (a repeated call).
--
-- Errors: none

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
local id, ttype = ARGV[1], ARGV[2]

if id ~= '' then
    if redis.call('HSETNX', KEYS[3], id, ttype) == 0 then
        return 0
    end
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])
    if KEYS[5] and ARGV[5] and ARGV[5] ~= '' then
        redis.call('HSET', KEYS[5], ARGV[4], ARGV[5])
    end
end
redis.call('HINCRBY', KEYS[1], ttype, 1)
redis.call('HINCRBY', KEYS[4], 'claimed', 1)
return 1
