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
--                upcoming = the count in (now, now+lead];
--                next the indexes 1..n of the types whose oldest ready and
--                oldest due task are read, in one argument, separated by
--                spaces (the others' ages come back as -2);
--                next m, the number of stats fields read this pass, then the m
--                fields (the caller reads the ones the policy needs on every
--                pass, and all of them only now and then).
--                (One argument per list, not one per item: the client spent
--                more on packing 3000 arguments than Redis on the reads.)
--
-- Returns {seconds, microseconds, idle_since[n], per_type[n * (5 + m)],
--          upcoming[k], bad, workers, schedulers, limits[n], paused[n]}
--   per_type    = flat, 5 + m integers per type, in the order of the names:
--                 queued, due, ready age ms, due age ms, active (ACTIVE_TASKS,
--                 >= 0), then the m stats field values (0 if unset).  The
--                 ages: how long the oldest ready task has waited
--                 (lib/oldest_ready.lua: the rule the console shares), and how
--                 long the earliest due delayed task has been due; -1 when
--                 there is none, -2 when not read (a type whose ages were not
--                 asked for; its due age only when it has due tasks).  Redis
--                 clock.  (Flat,
--                 not a table per type: 2000 small tables cost Redis and the
--                 client's parser more than the values; integers, not the
--                 stored strings: converting here costs Redis less than the
--                 client.)
--   bad         = nil, or "type field value" for the first ACTIVE_TASKS or
--                 stats value that is not a number (the caller refuses the
--                 reading: data that breaks the schema is not idle)
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

-- A value the schema says is a number but is not: the first one found is
-- returned (bad) and the caller refuses the reading, instead of taking it
-- as 0 or idle.
local bad = false

-- Per type: its ready count from KEYS[6] (read as 0 when below: claims of
-- tasks a producer pushed without counting, until the scheduler's recount
-- repairs it); its delayed set counted up to the longest lead (an empty
-- set, or one with nothing due within the lead, costs that one call), then
-- its due tasks (a second ZCOUNT; not needed with no lead); the earliest
-- due entry (ZRANGE) only for the types whose ages are asked for; the stats
-- counters asked for.  (Before: the first entry, then a ZCOUNT for the due
-- and one for the upcoming tasks -- 2.6 calls per busy type instead of 2,
-- and a score formatted for each.  Reading the set's first 16 entries
-- WITHSCORES in one call, to count from their scores, cost ~3x as much in
-- Redis as those three.)  Counters come back as integers (tonumber here is
-- cheaper than the client's parsing of the strings).

-- The longest look-ahead of each type (0 if none): one ZCOUNT up to it
-- gives due + upcoming; most windows are then a subtraction, not a call.
local max_lead = {}
for w = 1, k do
    local i = tonumber(windows[2 * w - 1])
    local lead = tonumber(windows[2 * w])
    if lead > (max_lead[i] or 0) then
        max_lead[i] = lead
    end
end

-- The score bounds as text, formatted once a pass, not by every call that
-- takes them (a number argument is formatted by each redis.call).
local now_text = tostring(now)
local after_now = '(' .. now_text
local upto_text = {}
local function upto(lead)
    local text = upto_text[lead]
    if not text then
        text = tostring(now + lead)
        upto_text[lead] = text
    end
    return text
end

local per_type = {}
local delayed_keys = {}
local due_of = {}
local within_of = {}
local filled = 0
local width = 5 + m
for i = 1, n do
    local name = names[i]
    local queued = math.max(0, tonumber(ready_counts[i]) or 0)
    local delayed = delayed_before .. name .. delayed_after
    local due, ready_ms, due_ms = 0, -2, -1
    local lead = max_lead[i] or 0
    local within = redis.call('ZCOUNT', delayed, '-inf', upto(lead))
    if within > 0 then
        due = within
        if lead > 0 then
            due = redis.call('ZCOUNT', delayed, '-inf', now_text)
        end
        delayed_keys[i] = delayed
        due_of[i] = due
        within_of[i] = within
        if due > 0 then
            due_ms = -2
            if wants_age[i] then
                local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
                due_ms = now - tonumber(first[2])
            end
        end
    end
    if wants_age[i] then
        ready_ms = queued > 0 and ready_age(name) or -1
    end
    local running = 0
    if active[i] then
        running = tonumber(active[i])
        if running == nil then
            bad = bad or (name .. ' active ' .. active[i])
            running = 0
        end
    end
    per_type[filled + 1] = queued
    per_type[filled + 2] = due
    per_type[filled + 3] = ready_ms
    per_type[filled + 4] = due_ms
    per_type[filled + 5] = math.max(0, running)
    if m > 0 then
        local values = redis.call('HMGET', stats_before .. name .. stats_after, unpack(fields))
        for j = 1, m do
            local v = values[j]
            local x = 0
            if v then
                x = tonumber(v)
                if x == nil then
                    bad = bad or (name .. ' ' .. fields[j] .. ' ' .. v)
                    x = 0
                end
            end
            per_type[filled + 5 + j] = x
        end
    end
    filled = filled + width
end

-- upcoming = (now, now + lead]: the type's longest window is its count up
-- to that lead less the due ones; a shorter one (a type two scalers watch
-- with two leads) is a ZCOUNT of its own; nothing within the longest lead,
-- nothing within any.
local upcoming = {}
for w = 1, k do
    local i = tonumber(windows[2 * w - 1])
    local lead = tonumber(windows[2 * w])
    local count = 0
    if delayed_keys[i] then
        if lead == (max_lead[i] or 0) then
            count = within_of[i] - due_of[i]
        else
            count = redis.call('ZCOUNT', delayed_keys[i], after_now, upto(lead))
        end
    end
    upcoming[w] = count
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

return {clock[1], clock[2], idle, per_type, upcoming, bad, workers, schedulers, limits, paused}
