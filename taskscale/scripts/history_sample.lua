-- history_sample: record queued (ready tasks, every priority) and running
-- (ACTIVE_TASKS) of every type in the current 10 s history bucket, once per
-- bucket however many schedulers call it (the first call of a bucket does
-- it; the others find its number in KEYS[3] and return 0).  A type with
-- nothing queued or running writes nothing (absent reads as 0), so idle
-- types cost no memory.
--
-- KEYS[1]  {ns}:types            set of task types
-- KEYS[2]  {ns}:ACTIVE_TASKS     hash T -> tasks running now
-- KEYS[3]  {ns}:history:sampled  the last bucket sampled
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  seconds a bucket lives (24 h)
--
-- Returns the number of types written (0 when this bucket was sampled already).
--
-- Errors: none

local prefix, keep = ARGV[1], tonumber(ARGV[2])
--! include lib/clock.lua

local bucket = math.floor(now / 10000)
if redis.call('GET', KEYS[3]) == tostring(bucket) then
    return 0
end
redis.call('SET', KEYS[3], bucket, 'EX', 60)
local n = 0
for _, ttype in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    local queued = 0
    for level = 0, 9 do
        queued = queued + redis.call('LLEN', prefix .. 'q:' .. ttype .. ':' .. level)
    end
    local running = tonumber(redis.call('HGET', KEYS[2], ttype) or '0') or 0
    if queued > 0 or running > 0 then
        local hkey = prefix .. 'history:' .. ttype .. ':' .. bucket
        redis.call('HSET', hkey, 'q', queued, 'r', running)
        redis.call('EXPIRE', hkey, keep)
        n = n + 1
    end
end
return n
