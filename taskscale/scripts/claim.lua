-- claim: hand up to k ready tasks to worker W, most urgent level first across
-- its types (in the order given: the caller rotates it for fairness), FIFO
-- within a level.  Each claimed envelope is recorded in W's in-flight hash
-- (its lease: the reaper returns it if W's heartbeat expires) and counted in
-- ACTIVE_TASKS, in this one script, so a crash can neither lose nor skew it.
--
-- Flow control (docs/schema.md, "Limits"): a type with a limit in KEYS[4]
-- gets at most min(tokens in its bucket, concurrency cap - ACTIVE_TASKS[T])
-- tasks.  The bucket ({ns}:bucket:T: tokens, and "ms", the unix time in ms,
-- to the µs, of the last update) refills
-- at N per period on the Redis clock, up to its burst; a claimed task takes
-- one token.  "Running" is ACTIVE_TASKS, which complete / fail / requeue /
-- reap keep exact, so a crashed worker's slots come back when it is reaped.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now
-- KEYS[2]  {ns}:workers       zset W -> lease expiry (unix ms)
-- KEYS[3]  {ns}:inflight:W    hash task id -> envelope
-- KEYS[4]  {ns}:limits        hash T -> JSON limits (absent = no type limited)
--
-- A paused type ({ns}:paused has a field T: `taskscale types pause`) is not
-- claimed at all: one HMGET of that hash per claim, the types' tasks stay
-- queued, and it is not chain-woken (type_pause.lua wakes it on resume).
--
-- A worker whose pod is being drained ({ns}:draining has a field for the
-- "pod" of W's registry record {ns}:worker:W: the controller sets it while
-- the pod's node is cordoned or tainted for removal) claims nothing: the
-- status is "draining", and a wake token is passed on for each of its types
-- with ready tasks (the token that woke W goes to an idle worker elsewhere).
-- One EXISTS when no pod drains; a draining key or record of another type
-- counts as no flag (a malformed flag never stops a claim).
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  W, the worker id
-- ARGV[3]  k, the most tasks to claim (the worker's free threads)
-- ARGV[4]  the most records a dead:T list keeps (0 = no cap), as fail.lua's
--          ARGV[12]: the oldest beyond it are dropped, counted in stats
--          "dead_dropped"
-- ARGV[5..] the task types W serves, the one to favour first
--
-- Returns {status, now_ms, held, T1, id1, envelope1, T2, id2, envelope2, ...};
-- status is "ok", or "unregistered" (nothing claimed; no "held") when W holds
-- no live lease: a reaped worker must heartbeat again before it claims, or
-- "draining" (nothing claimed; no "held") when W's pod is being drained: the
-- worker finishes what it runs and asks again later.
-- held is "" or "T1=ms1,T2=ms2": the rate-limited types that still have
-- ready tasks but no token, and the ms until their next token (a worker
-- should not wait on their wake lists before then, and claim again then).
-- An envelope that does not decode, lacks an id, names another type or
-- repeats an id W already holds goes to dead:T with the reason (under the
-- cap of ARGV[4], like any dead letter).  A key of the wrong type is the
-- error "BADKEY <key> ..." before anything is written (lib/key_types.lua).
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix, worker, k, dead_cap = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
--! include lib/clock.lua
--! include lib/key_types.lua
--! include lib/wake_cap.lua

-- every key this claim may write, checked before the first write; the
-- ready lists (ten a type) only when the first pop meets one of the wrong
-- type (below): a TYPE each was a third of a claim's commands (issue 27)
local paused_key = prefix .. 'paused'
local checks = {KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4] or false, 'hash',
    paused_key, 'hash'}
for i = 5, #ARGV do
    local t = ARGV[i]
    for _, c in ipairs({prefix .. 'stats:' .. t, 'hash', prefix .. 'dead:' .. t, 'list',
        prefix .. 'wake:' .. t, 'list', prefix .. 'bucket:' .. t, 'hash'}) do
        checks[#checks + 1] = c
    end
end
local function ready_lists()
    local lists = {}
    for i = 5, #ARGV do
        for level = 0, 9 do
            lists[#lists + 1] = prefix .. 'q:' .. ARGV[i] .. ':' .. level
            lists[#lists + 1] = 'list'
        end
    end
    return lists
end
local bad = wrong_key(checks)
if bad then
    return bad
end

local lease = redis.call('ZSCORE', KEYS[2], worker)
if not lease or tonumber(lease) < now then
    return {'unregistered', now}
end

local draining_key = prefix .. 'draining'
if redis.call('EXISTS', draining_key) == 1 and redis.call('TYPE', draining_key).ok == 'hash' then
    local record = prefix .. 'worker:' .. worker
    local pod = redis.call('TYPE', record).ok == 'hash' and redis.call('HGET', record, 'pod')
    if pod and redis.call('HEXISTS', draining_key, pod) == 1 then
        for i = 5, #ARGV do
            local levels = {}
            for level = 0, 9 do
                levels[#levels + 1] = prefix .. 'q:' .. ARGV[i] .. ':' .. level
            end
            if redis.call('EXISTS', unpack(levels)) > 0 then
                local wkey = prefix .. 'wake:' .. ARGV[i]
                redis.call('RPUSH', wkey, '1')
                redis.call('LTRIM', wkey, -WAKE_CAP, -1)
            end
        end
        return {'draining', now}
    end
end

--! include lib/limits.lua
--! include lib/dead_letter.lua
--! include lib/queued.lua

local ntypes = #ARGV - 4
local types = {}
for i = 1, ntypes do
    types[i] = ARGV[i + 4]
end

-- budget[T]: how many more T may be claimed now (math.huge = unlimited).
local budget, lims, tokens = {}, {}, {}
local limited = false
local specs = KEYS[4] and redis.call('HMGET', KEYS[4], unpack(types)) or {}
local paused = redis.call('HMGET', paused_key, unpack(types))
for i, ttype in ipairs(types) do
    local lim = limits_of(specs[i])
    budget[ttype] = math.huge
    if paused[i] then
        budget[ttype] = 0  -- paused: none claimed, its bucket untouched
    elseif lim then
        limited = true
        lims[ttype] = lim
        if lim.concurrency > 0 then
            local running = tonumber(redis.call('HGET', KEYS[1], ttype)) or 0
            budget[ttype] = math.max(0, lim.concurrency - running)
        end
        if lim.per_ms then
            local b = redis.call('HMGET', prefix .. 'bucket:' .. ttype, 'tokens', 'ms')
            local have, at = tonumber(b[1]), tonumber(b[2])
            if have == nil or at == nil then
                have = lim.burst
            else
                have = math.min(lim.burst, have + math.max(0, now_exact - at) * lim.per_ms)
            end
            tokens[ttype] = have
            budget[ttype] = math.min(budget[ttype], math.floor(have + 1e-9))
        end
    end
end

local out = {'ok', now, ''}
local claimed, waited, deadn = {}, {}, {}

local function dead_letter(ttype, env, reason)
    dead_push(ttype, cjson.encode({envelope = env, error = reason, failed_ms = now}), dead_cap)
    deadn[ttype] = (deadn[ttype] or 0) + 1
end

local function take(ttype, env)
    local ok, doc = pcall(cjson.decode, env)
    if not ok or type(doc) ~= 'table' then
        return dead_letter(ttype, env, 'envelope is not a JSON object')
    end
    if type(doc.id) ~= 'string' or doc.id == '' then
        return dead_letter(ttype, env, 'envelope has no string "id"')
    end
    if doc.type ~= ttype then
        return dead_letter(ttype, env, 'envelope "type" does not match its queue ' .. ttype)
    end
    if redis.call('HSETNX', KEYS[3], doc.id, env) == 0 then
        return dead_letter(ttype, env, 'task id ' .. doc.id .. ' is already in flight on worker ' .. worker)
    end
    local since = tonumber(doc.due_ms) or tonumber(doc.enqueued_ms)
    if not since or since ~= since or since < 0 or since > now then
        since = now  -- absent or out of range (1e400, -1e30: the worker dead-letters it)
    end
    claimed[ttype] = (claimed[ttype] or 0) + 1
    waited[ttype] = (waited[ttype] or 0) + math.max(0, now - since)
    out[#out + 1] = ttype
    out[#out + 1] = doc.id
    out[#out + 1] = env
    return true
end

-- One LMPOP over the ready lists of every type that may still be claimed,
-- level-major; its COUNT is at most the largest budget among them.
local qtype = {}
local function lmpop_of()
    local cmd, most = {'LMPOP', 0}, 0
    for level = 0, 9 do
        for _, ttype in ipairs(types) do
            if budget[ttype] > 0 then
                local key = prefix .. 'q:' .. ttype .. ':' .. level
                cmd[#cmd + 1] = key
                qtype[key] = ttype
                most = math.max(most, budget[ttype])
            end
        end
    end
    cmd[2] = #cmd - 2
    cmd[#cmd + 1] = 'LEFT'
    cmd[#cmd + 1] = 'COUNT'
    return cmd, most
end

-- A ready list of the wrong type fails its LMPOP, which then pops nothing.
-- The first LMPOP is this claim's first write: its failure is the BADKEY
-- reply (the lists checked now), nothing written.  A later one (the lists
-- before it ran out during this claim) ends the claim with what it took;
-- the next claim's first LMPOP meets the key and names it.
local first_pop = true
local lmpop, most = lmpop_of()
local count_at = #lmpop + 1
local remaining = k
while remaining > 0 and lmpop[2] > 0 do
    lmpop[count_at] = math.min(remaining, most)
    local popped = redis.pcall(unpack(lmpop))
    if type(popped) == 'table' and popped.err then
        if first_pop then
            return wrong_key(ready_lists()) or popped
        end
        break
    end
    first_pop = false
    if not popped then
        break
    end
    local ttype = qtype[popped[1]]
    local back = {}
    for _, env in ipairs(popped[2]) do
        if budget[ttype] <= 0 then
            table.insert(back, 1, env)
        elseif take(ttype, env) == true then
            remaining = remaining - 1
            budget[ttype] = budget[ttype] - 1
        end
    end
    count_queued(ttype, #back - #popped[2])
    if #back > 0 then  -- over this type's budget: back to the head, order kept
        redis.call('LPUSH', popped[1], unpack(back))
    end
    if budget[ttype] <= 0 then
        lmpop, most = lmpop_of()
        count_at = #lmpop + 1
    end
end

for ttype, n in pairs(claimed) do
    redis.call('HINCRBY', KEYS[1], ttype, n)
    local skey = prefix .. 'stats:' .. ttype
    redis.call('HINCRBY', skey, 'claimed', n)
    redis.call('HINCRBY', skey, 'wait_ms', waited[ttype])
end
for ttype, n in pairs(deadn) do
    redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'dead', n)
end

local function has_ready(ttype)
    local keys = {}
    for level = 0, 9 do
        keys[#keys + 1] = prefix .. 'q:' .. ttype .. ':' .. level
    end
    return redis.call('EXISTS', unpack(keys)) > 0
end

-- Rate-limited types: take the tokens spent; name those left waiting.
if limited then
    local held = {}
    for _, ttype in ipairs(types) do
        local lim = lims[ttype]
        if lim and lim.per_ms then
            local left = tokens[ttype] - (claimed[ttype] or 0)
            local bkey = prefix .. 'bucket:' .. ttype
            if claimed[ttype] then
                redis.call('HSET', bkey, 'tokens', string.format('%.17g', left),
                    'ms', string.format('%.17g', now_exact))
                redis.call('PEXPIRE', bkey, math.ceil((lim.burst - left) / lim.per_ms) + 1000)
            end
            if left < 1 - 1e-9 and has_ready(ttype) then
                held[#held + 1] = ttype .. '=' .. math.max(1, math.ceil((1 - left) / lim.per_ms))
            end
        end
    end
    out[3] = table.concat(held, ',')
end

-- Work left behind: chain-wake another idle worker of each such type that
-- may still be claimed (a type at its limit would wake it for nothing).
-- One waiting token is enough (the worker it wakes chain-wakes the next): a
-- busy worker claims again and again under a backlog, and a token per claim
-- piled up to WAKE_CAP, each making an idle claimer claim for nothing later.
if remaining == 0 then
    for _, ttype in ipairs(types) do
        local wkey = prefix .. 'wake:' .. ttype
        if budget[ttype] > 0 and redis.call('LLEN', wkey) == 0 and has_ready(ttype) then
            redis.call('RPUSH', wkey, '1')
            redis.call('LTRIM', wkey, -WAKE_CAP, -1)
        end
    end
end
return out
