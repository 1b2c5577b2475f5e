-- history_add: add one worker's counts since its last write to the current
-- 10 s history bucket of each type (taskscale/history.py): completed,
-- failed and dead runs, and the queue-wait and run-time histogram bins; and
-- push its most recent runs to each type's capped recent:T list.  One call
-- per heartbeat for every type, never one per task; the bucket is the
-- Redis clock's, so workers' clocks never skew it.
--
-- KEYS[1]  {ns}:types  set of task types (not read: routes the call)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  seconds a bucket lives (24 h)
-- ARGV[3]  the most records {ns}:recent:T keeps (0 = none)
-- ARGV[4]  n, the number of count triples that follow
-- ARGV[5..]  n triples: T, field ("c", "f", "d", "w<bin>", "s<bin>"), count;
--          then pairs: T, a recent-run record (JSON), oldest first
--
-- Returns the number of fields incremented.
--
-- Errors: none

local prefix, keep, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]) or 0
local n = tonumber(ARGV[4]) or 0
--! include lib/clock.lua

local bucket = math.floor(now / 10000)
local seen = {}
for i = 5, 4 + 3 * n, 3 do
    local hkey = prefix .. 'history:' .. ARGV[i] .. ':' .. bucket
    redis.call('HINCRBY', hkey, ARGV[i + 1], tonumber(ARGV[i + 2]))
    if not seen[hkey] then
        seen[hkey] = true
        redis.call('EXPIRE', hkey, keep)
    end
end
if cap > 0 then
    local pushed = {}
    for i = 5 + 3 * n, #ARGV - 1, 2 do
        local rkey = prefix .. 'recent:' .. ARGV[i]
        redis.call('LPUSH', rkey, ARGV[i + 1])
        pushed[rkey] = true
    end
    for rkey in pairs(pushed) do
        redis.call('LTRIM', rkey, 0, cap - 1)
    end
end
return n
