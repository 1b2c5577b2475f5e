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
