#!lua flags=no-writes
-- observe: everything the controller's policy needs, for many task types, in
-- one read-only call on the Redis clock (used by taskscale.controller.observer).
--
-- KEYS[1]  ACTIVE_TASKS hash (type -> running)
-- KEYS[2]  IDLE_SINCE hash (type -> unix seconds)
-- KEYS[3]  workers zset (worker id -> lease expiry, unix ms)
-- KEYS[4]  schedulers zset (scheduler id -> lease expiry, unix ms)
-- KEYS[5]  limits hash (type -> JSON flow-control limits)
-- KEYS[6]  QUEUED hash (type -> tasks in its ready lists, kept by the scripts
--          that push and pop them: docs/schema.md, "The ready count")
-- KEYS[7]  paused hash (type -> unix ms paused since: `taskscale types pause`)
--
-- Per-type keys are built here from templates, each a (before, after) pair
-- around the type name, that the caller derives from taskscale/keys.py.  All
-- keys share the namespace's hash tag, so they live in KEYS[1]'s slot.  A
-- type's ready tasks are one field of KEYS[6], not ten LLENs; its ready lists
-- are read only for the types whose oldest ready task is asked for.
--
-- ARGV[1]        worker record key prefix (a record is ARGV[1] .. W)
-- ARGV[2]        delayed zset template: the text before the type name
-- ARGV[3]        delayed zset template: the text after it
-- ARGV[4]        stats hash template: before
-- ARGV[5]        stats hash template: after
-- ARGV[6..]      L, the number of ready-list templates (one per priority level,
--                any order: the default priority's first is cheapest), then L pairs;
--                next the n type names, in one argument, separated by spaces;
--                next the k look-ahead windows, in one argument: k pairs
--                "type-index lead-ms" (index 1..n), all separated by spaces:
--                upcoming = ZCOUNT (now, now+lead];
--                next the indexes 1..n of the types whose oldest ready task is
--                read, in one argument, separated by spaces (the others' ready
--                age comes back as -2);
--                next m, the number of stats fields read this pass, then the m
--                fields (the caller reads the ones the policy needs on every
--                pass, and all of them only now and then).
--                (One argument per list, not one per item: the client spent
--                more on packing 3000 arguments than Redis on the reads.)
--
-- Returns {seconds, microseconds, active[n], idle_since[n], per_type[n * (4 + m)],
--          upcoming[k], workers, schedulers, limits[n], paused[n]}
--   per_type    = flat, 4 + m values per type, in the order of the names:
--                 queued, due, ready age ms, due age ms, then the m stats field
--                 values (nil if unset).  The ages: how long the oldest ready
--                 task has waited (lib/oldest_ready.lua: the rule the console
--                 shares; -2 when not asked for), and how long the earliest due
--                 delayed task has been due; -1 when there is none.  Redis
--                 clock.  (Flat, not a table per type: 2000 small tables cost
--                 Redis and the client's parser more than the values.)
--   workers     = flat {id, pod, types, threads, busy, ...} for every worker whose
--                 lease has not expired and whose record still exists.
--   limits[i]   = the type's JSON limits, nil if none
--   paused[i]   = the ms the type was paused since, nil if it is not paused
--   (limits and paused are empty arrays when their hash is: no type has
--   limits or is paused, the common case, costs no n-field HMGET)
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

local function words(text)
    local out = {}
    for word in string.gmatch(text, '%S+') do
        out[#out + 1] = word
    end
    return out
end

local worker_prefix = ARGV[1]
local delayed_before, delayed_after = take(), take()
local stats_before, stats_after = take(), take()
local list_templates, levels = take_list(2)
local names = words(take())
local n = #names
local windows = words(take())
local k = #windows / 2
local aged = words(take())
local fields, m = take_list(1)

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
local ready_counts = hmget_all(KEYS[6], names)

--! include lib/oldest_ready.lua

local function ready_age(name)
    local lists = {}
    for j = 1, levels do
        lists[j] = list_templates[2 * j - 1] .. name .. list_templates[2 * j]
    end
    return oldest_ready_ms(lists, now)
end

local wants_age = {}
for _, i in ipairs(aged) do
    wants_age[tonumber(i)] = true
end

-- Per type: its ready count from KEYS[6] (read as 0 when below: claims of
-- tasks a producer pushed without counting, until the scheduler's recount
-- repairs it), the
-- earliest delayed task first (an empty set costs that one call; a set
-- with nothing due costs no ZCOUNT), the stats counters asked for.  (Reading
-- the set's first 16 entries WITHSCORES in one call instead, to count from
-- their scores, cost ~3x as much in Redis as these up to three calls.)
local per_type = {}
local delayed_keys = {}
local earliest_of = {}
local filled = 0
for i = 1, n do
    local name = names[i]
    local queued = math.max(0, tonumber(ready_counts[i]) or 0)
    local delayed = delayed_before .. name .. delayed_after
    local due, ready_ms, due_ms = 0, -2, -1
    local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
    if first[2] then
        local earliest = tonumber(first[2])
        delayed_keys[i] = delayed
        earliest_of[i] = earliest
        if earliest <= now then
            due = redis.call('ZCOUNT', delayed, '-inf', now)
            due_ms = now - earliest
        end
    end
    if wants_age[i] then
        ready_ms = queued > 0 and ready_age(name) or -1
    end
    per_type[filled + 1] = queued
    per_type[filled + 2] = due
    per_type[filled + 3] = ready_ms
    per_type[filled + 4] = due_ms
    filled = filled + 4
    if m > 0 then
        local values = redis.call('HMGET', stats_before .. name .. stats_after, unpack(fields))
        for j = 1, m do
            per_type[filled + j] = values[j]
        end
        filled = filled + m
    end
end

local upcoming = {}
for w = 1, k do
    local i = tonumber(windows[2 * w - 1])
    local lead = tonumber(windows[2 * w])
    upcoming[w] = 0
    -- earliest beyond the lead: nothing upcoming, no ZCOUNT
    if delayed_keys[i] and earliest_of[i] <= now + lead then
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

-- Most namespaces set limits or pause for few types, if any: an empty hash
-- (HLEN 0) is not read field by field.
local function hmget_if_any(key)
    if redis.call('HLEN', key) == 0 then
        return {}
    end
    return hmget_all(key, names)
end
local limits = hmget_if_any(KEYS[5])
local paused = hmget_if_any(KEYS[7])

return {clock[1], clock[2], active, idle, per_type, upcoming, workers, schedulers, limits, paused}
