-- history_add: add one worker's counts since its last write to the current
-- 10 s history bucket of each type (taskscale/history.py): completed,
-- failed and dead runs, and the queue-wait and run-time histogram bins.
-- One call per heartbeat for every type, never one per task; the bucket is
-- the Redis clock's, so workers' clocks never skew it.
--
-- KEYS[1]  {ns}:types  set of task types (not read: routes the call)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  seconds a bucket lives (24 h)
-- ARGV[3..]  triples: T, field ("c", "f", "d", "w<bin>", "s<bin>"), count
--
-- Returns the number of fields incremented.
--
-- Errors: none

local prefix, keep = ARGV[1], tonumber(ARGV[2])
--! include lib/clock.lua

local bucket = math.floor(now / 10000)
local seen = {}
local n = 0
for i = 3, #ARGV - 2, 3 do
    local hkey = prefix .. 'history:' .. ARGV[i] .. ':' .. bucket
    redis.call('HINCRBY', hkey, ARGV[i + 1], tonumber(ARGV[i + 2]))
    if not seen[hkey] then
        seen[hkey] = true
        redis.call('EXPIRE', hkey, keep)
    end
    n = n + 1
end
return n
