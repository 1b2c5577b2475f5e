#!lua flags=no-writes
-- observe: everything the controller's policy needs, for many task types, in
-- one read-only call on the Redis clock (used by taskscale.controller.observer).
--
-- KEYS[1]  ACTIVE_TASKS hash (type -> running)
-- KEYS[2]  IDLE_SINCE hash (type -> unix seconds)
-- KEYS[3]  workers zset (worker id -> lease expiry, unix ms)
-- KEYS[4]  schedulers zset (scheduler id -> lease expiry, unix ms)
-- KEYS[5]  limits hash (type -> JSON flow-control limits; optional)
--
-- Per-type keys are built here from templates, each a (before, after) pair
-- around the type name, that the caller derives from taskscale/keys.py: with
-- 1000 types, passing 12 names per type would cost more than the reads.  All
-- keys share the namespace's hash tag, so they live in KEYS[1]'s slot.
--
-- ARGV[1]        worker record key prefix (a record is ARGV[1] .. W)
-- ARGV[2]        delayed zset template: the text before the type name
-- ARGV[3]        delayed zset template: the text after it
-- ARGV[4]        stats hash template: before
-- ARGV[5]        stats hash template: after
-- ARGV[6..]      L, the number of ready-list templates (one per priority level,
--                any order: the default priority's first is cheapest), then L pairs;
--                next n, the number of types, then the n type names;
--                next m, the number of stats fields, then the m fields;
--                next k, the number of look-ahead windows, then k pairs
--                (type index 1..n, lead ms): upcoming = ZCOUNT (now, now+lead]
--
-- Returns {seconds, microseconds, active[n], idle_since[n], per_type[n],
--          upcoming[k], workers, schedulers, oldest[n],
--          limits[n]}
--   per_type[i] = {queued, due, stats field values (m, nil if unset)...}
--   workers     = flat {id, pod, types, threads, busy, ...} for every worker whose
--                 lease has not expired and whose record still exists.
--   oldest[i]   = {ready age ms, due age ms}: how long the oldest ready task has
--                 waited (lib/oldest_ready.lua: the rule the console shares), and
--                 how long the earliest due delayed task has been due; -1 when
--                 there is none.  Redis clock.
--   limits[i]   = the type's JSON limits, nil if none (empty without KEYS[5])
--
-- Errors: none

--! include lib/clock.lua

local at = 1
local function take()
    at = at + 1
    return ARGV[at]
end
local function take_list(width)
    local count = tonumber(take())
    local out = {}
    for i = 1, count * width do
        out[i] = take()
    end
    return out, count
end

local worker_prefix = ARGV[1]
local delayed_before, delayed_after = take(), take()
local stats_before, stats_after = take(), take()
local list_templates, levels = take_list(2)
local names, n = take_list(1)
local fields, m = take_list(1)
local windows, k = take_list(2)

-- HMGET in slices: unpack() of thousands of names would overflow the Lua stack.
local function hmget_all(key, wanted)
    local out = {}
    local slice = 500
    for first = 1, #wanted, slice do
        local last = math.min(first + slice - 1, #wanted)
        local got = redis.call('HMGET', key, unpack(wanted, first, last))
        for j = 1, #got do
            out[first + j - 1] = got[j]
        end
    end
    return out
end

local active = hmget_all(KEYS[1], names)
local idle = hmget_all(KEYS[2], names)

--! include lib/oldest_ready.lua

-- Most types of a large deployment are empty at any instant, and each call
-- from Lua has a cost, so count before reading: one EXISTS over the delayed
-- set and the ready lists says how many of them hold something (a key exists
-- only while it is non-empty).  An empty type costs that one call; otherwise
-- the LLEN loop stops once it has seen every non-empty list (the caller puts
-- the default priority's list first).
local function counts(name)
    local delayed = delayed_before .. name .. delayed_after
    local keys = {delayed}
    for j = 1, levels do
        keys[j + 1] = list_templates[2 * j - 1] .. name .. list_templates[2 * j]
    end
    local remaining = redis.call('EXISTS', unpack(keys))
    local queued, due, size = 0, 0, 0
    local oldest = {-1, -1}
    if remaining == 0 then
        return delayed, size, queued, due, oldest
    end
    size = redis.call('ZCARD', delayed)
    if size > 0 then
        remaining = remaining - 1
        due = redis.call('ZCOUNT', delayed, '-inf', now)
        if due > 0 then
            local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
            oldest[2] = math.max(0, now - tonumber(first[2]))
        end
    end
    local j = 2
    local ready = {}
    while remaining > 0 do
        local len = redis.call('LLEN', keys[j])
        if len > 0 then
            queued = queued + len
            remaining = remaining - 1
            ready[#ready + 1] = keys[j]
        end
        j = j + 1
    end
    oldest[1] = oldest_ready_ms(ready, now)
    return delayed, size, queued, due, oldest
end

local per_type = {}
local delayed_keys = {}
local delayed_size = {}
local oldest = {}
for i = 1, n do
    local name = names[i]
    local delayed, size, queued, due, ages = counts(name)
    oldest[i] = ages
    delayed_keys[i] = delayed
    delayed_size[i] = size
    local row = {queued, due}
    if m > 0 then
        local values = redis.call('HMGET', stats_before .. name .. stats_after, unpack(fields))
        for j = 1, m do
            row[2 + j] = values[j]
        end
    end
    per_type[i] = row
end

local upcoming = {}
for w = 1, k do
    local i = tonumber(windows[2 * w - 1])
    local lead = tonumber(windows[2 * w])
    upcoming[w] = 0
    if delayed_size[i] > 0 then
        upcoming[w] = redis.call('ZCOUNT', delayed_keys[i], '(' .. now, now + lead)
    end
end

local workers = {}
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], now, '+inf')
for _, id in ipairs(ids) do
    local rec = redis.call('HMGET', worker_prefix .. id, 'pod', 'types', 'threads', 'busy')
    if rec[2] then
        workers[#workers + 1] = id
        workers[#workers + 1] = rec[1] or id
        workers[#workers + 1] = rec[2]
        workers[#workers + 1] = rec[3] or '0'
        workers[#workers + 1] = rec[4] or '0'
    end
end

-- Live schedulers: without one, due delayed tasks never become ready.
local schedulers = redis.call('ZCOUNT', KEYS[4], now, '+inf')

local limits = KEYS[5] and hmget_all(KEYS[5], names) or {}

return {clock[1], clock[2], active, idle, per_type, upcoming, workers, schedulers, oldest, limits}
