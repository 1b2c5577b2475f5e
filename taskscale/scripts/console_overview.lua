#!lua flags=no-writes
-- console_overview: the console's whole overview of one namespace in one
-- read-only call on the Redis clock (used by taskscale.dashboard.overview), as
-- observe.lua reads for the controller: every type's queues, delayed and
-- dead tasks, counters, the delayed tasks due soon and how long the oldest
-- ready task has waited (lib/oldest_ready.lua, the controller's rule), its
-- history's counts of the last full buckets (the overview's rates), and the
-- live workers' records, the live schedulers and the open fan-outs -- what
-- `taskscale status` reads in ~15 pipelined commands per type. One EXISTS
-- of a type's ten ready lists says how many hold tasks; they are LLENed in
-- priority order only until that many are found (an idle type costs one
-- read, not ten; exact whatever the ready count QUEUED says). Delayed tasks
-- are counted from the earliest one's due time when it settles the count.
-- The history's full buckets never change once past (writers add to the
-- current bucket only), so a caller that holds the rates of the same last
-- full bucket (ARGV[6]) gets none: the history is not read again.
--
-- KEYS[1]  {ns}:types        set of task types ever enqueued
-- KEYS[2]  {ns}:ACTIVE_TASKS hash type -> tasks running
-- KEYS[3]  {ns}:IDLE_SINCE  hash type -> unix seconds
-- KEYS[4]  {ns}:workers      zset worker id -> lease expiry, unix ms
-- KEYS[5]  {ns}:limits       hash type -> JSON flow-control limits
-- KEYS[6]  {ns}:schedulers   zset scheduler id -> lease expiry, unix ms
-- KEYS[7]  {ns}:fanouts:open zset of open streamed fan-outs -> expiry, unix ms
-- KEYS[8]  {ns}:paused       hash type -> unix ms paused since
--
-- Per-type keys ({ns}:q:T:P, delayed:T, dead:T, stats:T, history:T:B) and worker records
-- ({ns}:worker:W) are built here from the prefix: all share KEYS[1]'s slot.
--
-- ARGV[1]   key prefix "{ns}:"
-- ARGV[2]   overdue grace, ms: a delayed task due before now - ARGV[2] is overdue
-- ARGV[3]   "due soon" window, ms: delayed tasks due in [now - ARGV[2], now + ARGV[3]]
-- ARGV[4]   history bucket width, s (history:T:B, B = unix s // ARGV[4])
-- ARGV[5]   full history buckets to read per type for the rates (0 = none):
--           the ARGV[5] before the current, partial one
-- ARGV[6]   the last full bucket whose rates the caller holds (-1 none): when
--           it is this call's last full bucket, the history is not read
-- ARGV[7..] the stats fields to read per type, in order
--
-- Returns {{seconds, microseconds}, names, rows, active, idle_since, limits,
--          workers, schedulers, open_fanouts, paused, enqueued, rated}
--   names       every type: in KEYS[1], KEYS[2], KEYS[3], KEYS[5] or KEYS[8];
--               those of KEYS[1] first
--   rows        flat, per type of `names` in order: ready tasks per priority
--               level 0..9, delayed, dead letters, overdue, the earliest due
--               time (unix ms, -1 none), due soon, the oldest ready task's
--               wait in ms (-1 none), each ARGV[7..] stats field (0 unset),
--               then history field `c` of each full bucket read (the
--               ARGV[5] ones when `rated` is 1, none when 0), oldest first,
--               and the sums of `f` and of `d` over them (all 0 for a type
--               not in KEYS[1])
--   active, idle_since, limits   HGETALL of KEYS[2], KEYS[3], KEYS[5]
--   workers     flat {id, lease expiry ms, HGETALL of its record} per member
--               of KEYS[4]
--   schedulers  the ids in KEYS[6] whose lease has not expired
--   open_fanouts how many members of KEYS[7] have not expired
--   paused      HGETALL of KEYS[8]
--   enqueued    how many of `names` (the first ones) are members of KEYS[1]
--   rated       1 when the rows hold the history's numbers, 0 when not
--               (ARGV[5] is 0, or ARGV[6] is this call's last full bucket)
--
-- Errors: none

--! include lib/clock.lua
--! include lib/oldest_ready.lua

local prefix = ARGV[1]
local grace, window = tonumber(ARGV[2]), tonumber(ARGV[3])
local bucket_ms, n_buckets = tonumber(ARGV[4]) * 1000, tonumber(ARGV[5])
local last_full = math.floor(now / bucket_ms) - 1
if n_buckets > 0 and tonumber(ARGV[6]) == last_full then
    n_buckets = 0  -- the caller holds these rates: the past does not change
end
local rated = n_buckets > 0 and 1 or 0
local stats_fields = {}
for i = 7, #ARGV do
    stats_fields[#stats_fields + 1] = ARGV[i]
end

-- Every type any of the namespace's per-type records names.
local names, seen = {}, {}
local function add(name)
    if not seen[name] then
        seen[name] = true
        names[#names + 1] = name
    end
end
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do add(name) end
local enqueued = #names
local active = redis.call('HGETALL', KEYS[2])
local idle = redis.call('HGETALL', KEYS[3])
local limits = redis.call('HGETALL', KEYS[5])
local paused = redis.call('HGETALL', KEYS[8])
for _, flat in ipairs({active, idle, limits, paused}) do
    for i = 1, #flat, 2 do add(flat[i]) end
end

-- One type's numbers, appended to `rows` in the order the header lists.
local rows = {}
local function type_row(name, in_types)
    local lists = {}
    local levels = {}
    for level = 0, 9 do levels[level + 1] = prefix .. 'q:' .. name .. ':' .. level end
    local left = redis.call('EXISTS', unpack(levels))  -- how many lists hold tasks
    for _, key in ipairs(levels) do
        local n = 0
        if left > 0 then  -- the empty lists after the last non-empty one: not read
            n = redis.call('LLEN', key)
            if n > 0 then
                left = left - 1
                lists[#lists + 1] = key
            end
        end
        rows[#rows + 1] = n
    end
    local delayed = prefix .. 'delayed:' .. name
    local n_delayed = redis.call('ZCARD', delayed)
    rows[#rows + 1] = n_delayed
    rows[#rows + 1] = redis.call('LLEN', prefix .. 'dead:' .. name)
    if n_delayed > 0 then  -- most types have none: these reads saved
        local earliest = tonumber(redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')[2])
        local soon_from, soon_to = now - grace, now + window
        -- the earliest due time settles a count when none or all can be in its range
        if earliest > soon_from then
            rows[#rows + 1] = 0  -- overdue: none is due before the earliest
        elseif n_delayed == 1 then
            rows[#rows + 1] = 1
        else
            rows[#rows + 1] = redis.call('ZCOUNT', delayed, '-inf', soon_from)
        end
        rows[#rows + 1] = math.floor(earliest)
        if earliest > soon_to then
            rows[#rows + 1] = 0  -- due soon: none
        elseif n_delayed == 1 then
            rows[#rows + 1] = earliest >= soon_from and 1 or 0
        else
            rows[#rows + 1] = redis.call('ZCOUNT', delayed, soon_from, soon_to)
        end
    else
        rows[#rows + 1] = 0   -- overdue
        rows[#rows + 1] = -1  -- earliest due
        rows[#rows + 1] = 0   -- due soon
    end
    rows[#rows + 1] = oldest_ready_ms(lists, now)
    local stats = redis.call('HMGET', prefix .. 'stats:' .. name, unpack(stats_fields))
    for i = 1, #stats_fields do
        rows[#rows + 1] = tonumber(stats[i]) or 0
    end
    local failed, dead = 0, 0
    local buckets = {}
    for b = last_full - n_buckets + 1, last_full do
        buckets[#buckets + 1] = prefix .. 'history:' .. name .. ':' .. b
    end
    -- one EXISTS first: most types ran nothing in the last minute
    local any = in_types and #buckets > 0 and redis.call('EXISTS', unpack(buckets)) > 0
    for _, key in ipairs(buckets) do
        local got = {}
        if any then got = redis.call('HMGET', key, 'c', 'f', 'd') end
        rows[#rows + 1] = tonumber(got[1]) or 0
        failed = failed + (tonumber(got[2]) or 0)
        dead = dead + (tonumber(got[3]) or 0)
    end
    rows[#rows + 1] = failed
    rows[#rows + 1] = dead
end
for i, name in ipairs(names) do type_row(name, i <= enqueued) end

local workers = {}
for _, pair in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')) do
    workers[#workers + 1] = pair
end
local listed = {}
for i = 1, #workers, 2 do
    listed[#listed + 1] = workers[i]
    listed[#listed + 1] = workers[i + 1]
    listed[#listed + 1] = redis.call('HGETALL', prefix .. 'worker:' .. workers[i])
end

return {clock, names, rows, active, idle, limits, listed,
        redis.call('ZRANGEBYSCORE', KEYS[6], now, '+inf'),
        redis.call('ZCOUNT', KEYS[7], now, '+inf'),
        paused, enqueued, rated}
