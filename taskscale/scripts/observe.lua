#!lua flags=no-writes
-- observe: everything the controller's policy needs, for many task types, in
-- one read-only call on the Redis clock (used by taskscale.controller.observer).
--
-- KEYS[1]  ACTIVE_TASKS hash (type -> running)
-- KEYS[2]  IDLE_SINCE hash (type -> unix seconds)
-- KEYS[3]  workers zset (worker id -> lease expiry, unix ms)
-- KEYS[4 + (i-1)*S .. 3 + i*S], for type i of ARGV[3..]:
--          delayed zset, stats hash, then the ready lists q:T:0 .. q:T:9
--          (S = 2 + number of priority levels, given in ARGV[2])
--
-- ARGV[1]  worker record key prefix ("{ns}:worker:"; a record is prefix .. W)
-- ARGV[2]  S, the number of KEYS per type
-- ARGV[3]  n, the number of types
-- ARGV[4 .. 3+n]            the type names, in KEYS order
-- ARGV[4+n]                 m, the number of stats fields, then the m fields
-- next                      k, the number of look-ahead windows, then k pairs
--                           (type index 1..n, lead ms): upcoming = ZCOUNT (now, now+lead]
--
-- Returns {seconds, microseconds, active[n], idle_since[n], per_type[n],
--          upcoming[k], workers}
--   per_type[i] = {queued, due, stats field values (m, nil if unset)...}
--   workers     = flat {id, pod, types, threads, busy, ...} for every worker whose
--                 lease has not expired and whose record still exists.

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local per_type_keys = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local names = {}
for i = 1, n do
    names[i] = ARGV[3 + i]
end

local m = tonumber(ARGV[4 + n])
local fields = {}
for j = 1, m do
    fields[j] = ARGV[4 + n + j]
end

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

local per_type = {}
for i = 1, n do
    local base = 3 + (i - 1) * per_type_keys
    local queued = 0
    for q = base + 3, base + per_type_keys do
        queued = queued + redis.call('LLEN', KEYS[q])
    end
    local due = redis.call('ZCOUNT', KEYS[base + 1], '-inf', now_ms)
    local row = {queued, due}
    if m > 0 then
        local values = redis.call('HMGET', KEYS[base + 2], unpack(fields))
        for j = 1, m do
            row[2 + j] = values[j]
        end
    end
    per_type[i] = row
end

local k_at = 5 + n + m
local k = tonumber(ARGV[k_at])
local upcoming = {}
for w = 1, k do
    local i = tonumber(ARGV[k_at + 2 * w - 1])
    local lead = tonumber(ARGV[k_at + 2 * w])
    local delayed = KEYS[3 + (i - 1) * per_type_keys + 1]
    upcoming[w] = redis.call('ZCOUNT', delayed, '(' .. now_ms, now_ms + lead)
end

local workers = {}
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], now_ms, '+inf')
for _, id in ipairs(ids) do
    local rec = redis.call('HMGET', ARGV[1] .. id, 'pod', 'types', 'threads', 'busy')
    if rec[2] then
        workers[#workers + 1] = id
        workers[#workers + 1] = rec[1] or id
        workers[#workers + 1] = rec[2]
        workers[#workers + 1] = rec[3] or '0'
        workers[#workers + 1] = rec[4] or '0'
    end
end

return {time[1], time[2], active, idle, per_type, upcoming, workers}
