#!lua flags=no-writes
-- console_overview: what the console's overview adds to `taskscale status`
-- for every type of one namespace, in one read-only call (used by
-- taskscale.dashboard.data): the delayed tasks due soon, and how long the
-- oldest ready task has waited -- by lib/oldest_ready.lua, the rule the
-- controller's observe.lua uses.
--
-- KEYS[1..]     each type's delayed zset (n of them, n = #ARGV - 3), then the
--               types' non-empty ready lists, type after type (ARGV says
--               how many are each type's)
--
-- ARGV[1]       now, unix ms on the Redis clock (the status's TIME)
-- ARGV[2]       the "due soon" window's start: delayed tasks due in [ARGV[2], ARGV[3]]
-- ARGV[3]       the window's end, unix ms
-- ARGV[4..]     per type, how many of the ready lists are its own
--
-- Returns {due_soon[n], oldest[n]}: oldest[i] = ms the oldest ready task of
-- type i has waited at ARGV[1], -1 when there is none.
--
-- Errors: none

--! include lib/oldest_ready.lua

local now_ms = tonumber(ARGV[1])
local n = #ARGV - 3
local due_soon, oldest = {}, {}
local at = n
for i = 1, n do
    due_soon[i] = redis.call('ZCOUNT', KEYS[i], ARGV[2], ARGV[3])
    local lists = {}
    for j = 1, tonumber(ARGV[3 + i]) do
        lists[j] = KEYS[at + j]
    end
    at = at + #lists
    oldest[i] = oldest_ready_ms(lists, now_ms)
end
return {due_soon, oldest}
