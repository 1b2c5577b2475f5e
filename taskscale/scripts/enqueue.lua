-- enqueue: make envelopes of one task type ready (or delayed), atomically.
-- Any language can SCRIPT LOAD this file and EVALSHA it (docs/schema.md).
--
-- KEYS[1]  {ns}:types  set of every task type ever enqueued
--
-- ARGV[1]  key prefix, "{ns}:" (every other key is built from it; all keys
--          share the namespace hash tag, so this is legal on Redis Cluster)
-- ARGV[2]  T, the task type
-- ARGV[3]  delay in ms: 0 = ready now, > 0 = due at TIME + delay
-- ARGV[4]  largest envelope accepted, in bytes (0 = no limit)
-- ARGV[5..] envelopes: JSON objects with at least "id" and "type" (= T);
--          the script appends "enqueued_ms" from TIME (the last duplicate
--          key wins in JSON readers, so a stale one is overridden)
--
-- Unique tasks: an envelope with "unique_key" (1-200 characters of
-- A-Z a-z 0-9 _ . - :) and optionally "unique_for_ms" (>= 0) is enqueued only
-- if {ns}:unique:<key> does not exist; the script then SETs it to the task's
-- id (no TTL: it is held while the task is queued, delayed or running, and
-- released by complete / fail-to-dead / cancel, which keep it until
-- enqueued_ms + unique_for_ms when that is later).  Otherwise the envelope is
-- skipped, the id holding the key is reported and stats "unique_hits" +1.
--
-- Returns {n enqueued, i1, id1, i2, id2, ...}: each skipped envelope's
-- position (1-based) and the id of the task that holds its unique key.  An
-- invalid envelope is an error (Errors, below) and nothing
-- at all is written.
--
-- Errors: `invalid envelope #<i>: <n> bytes is over the limit of <ARGV[4]>`
--         `invalid envelope #<i>: not a JSON object`
--         `invalid envelope #<i>: "id" must be 1-128 characters of A-Z a-z 0-9 _ . -`
--         `invalid envelope #<i>: "type" must be <T>`
--         `invalid envelope #<i>: "priority" must be an integer 0-9`
--         `invalid envelope #<i>: "unique_key" must be 1-200 characters of A-Z a-z 0-9 _ . - :`
--         `invalid envelope #<i>: "unique_for_ms" must be a number >= 0`
--         (<i> is the envelope's 1-based position among ARGV[5..]; nothing is written)

local prefix, ttype = ARGV[1], ARGV[2]
local delay = tonumber(ARGV[3]) or 0
local max_bytes = tonumber(ARGV[4]) or 0
--! inline lib/wake_cap.lua
-- WAKE_CAP: the most tokens a wake list keeps ({ns}:wake:T, and
-- {ns}:wake:scheduler).  Every push onto one is followed by
-- LTRIM key -WAKE_CAP -1: a token only says "look again", so a list no one
-- pops stays this small.  The one definition in Lua (inlined by the include
-- directive of luascripts.py), equal to keys.WAKE_TOKENS_CAP, which the
-- Python callers pass to fanout_submit and fanout_add
-- (tests/scripts/test_wake_cap.py).
local WAKE_CAP = 64
--! end inline

--! inline lib/clock.lua
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
--! end inline
local enqueued_ms = string.format('%d', now)

--! inline lib/stamp.lua
-- Stamping a field into an envelope without re-encoding it, shared by every
-- script that adds one (inlined by the include directive of luascripts.py).
-- cjson would turn an empty "args": [] into {}, so an envelope is never
-- decoded and encoded again: its text is cut and joined.
--
-- stamp_json(env, field, json_text): env with ,"field":json_text appended as
-- the object's last member, which wins over an earlier one of the same name
-- in every JSON decoder taskscale uses (a stale stamp is overridden).  The
-- text after the last "}" is dropped; env without a "}" (not an object) is
-- returned unchanged (the claim script dead-letters it).
--
-- stamp_first(env, field, json_text): env with "field":json_text inserted as
-- the object's first member, for a field the envelope does not carry (a later
-- one of the same name would win).  env must start with "{".
local function stamp_json(env, field, json_text)
    local pos = #env
    while pos > 0 and string.sub(env, pos, pos) ~= '}' do
        pos = pos - 1
    end
    if pos == 0 then
        return env
    end
    return string.sub(env, 1, pos - 1) .. ',"' .. field .. '":' .. json_text .. '}'
end

local function stamp_first(env, field, json_text)
    return '{"' .. field .. '":' .. json_text .. ',' .. string.sub(env, 2)
end
--! end inline

local function valid_name(s)
    return type(s) == 'string' and #s >= 1 and #s <= 128 and string.match(s, '^[%w_%.%-]+$') ~= nil
end

-- validate everything first: all or nothing
local levels, uniq = {}, {}
for i = 5, #ARGV do
    local n = i - 4
    local env = ARGV[i]
    if max_bytes > 0 and #env > max_bytes then
        return redis.error_reply('invalid envelope #' .. n .. ': ' .. #env .. ' bytes is over the limit of ' .. max_bytes)
    end
    local ok, doc = pcall(cjson.decode, env)
    if not ok or type(doc) ~= 'table' then
        return redis.error_reply('invalid envelope #' .. n .. ': not a JSON object')
    end
    if not valid_name(doc.id) then
        return redis.error_reply('invalid envelope #' .. n .. ': "id" must be 1-128 characters of A-Z a-z 0-9 _ . -')
    end
    if doc.type ~= ttype then
        return redis.error_reply('invalid envelope #' .. n .. ': "type" must be ' .. ttype)
    end
    local p = doc.priority
    if p == nil then
        p = 5
    elseif type(p) ~= 'number' or p ~= math.floor(p) or p < 0 or p > 9 then
        return redis.error_reply('invalid envelope #' .. n .. ': "priority" must be an integer 0-9')
    end
    levels[n] = p
    local uk = doc.unique_key
    if uk ~= nil then
        if type(uk) ~= 'string' or #uk < 1 or #uk > 200 or string.match(uk, '^[%w_%.%-:]+$') == nil then
            return redis.error_reply('invalid envelope #' .. n .. ': "unique_key" must be 1-200 characters of A-Z a-z 0-9 _ . - :')
        end
        local uf = doc.unique_for_ms
        if uf ~= nil and (type(uf) ~= 'number' or uf < 0) then
            return redis.error_reply('invalid envelope #' .. n .. ': "unique_for_ms" must be a number >= 0')
        end
        uniq[n] = {uk, doc.id}
    end
end

-- unique keys: take each free one, skip the envelopes whose key is held
local envs, skipped = {}, {}
for i = 5, #ARGV do
    local n = i - 4
    local u = uniq[n]
    local holder = nil
    if u then
        local ukey = prefix .. 'unique:' .. u[1]
        holder = redis.call('GET', ukey)
        if not holder then
            redis.call('SET', ukey, u[2])
        end
    end
    if holder then
        skipped[#skipped + 1] = n
        skipped[#skipped + 1] = holder
    else
        envs[#envs + 1] = {ARGV[i], levels[n]}
    end
end

if #skipped > 0 then  -- each skipped envelope: one hit of a held unique key
    redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'unique_hits', #skipped / 2)
end
local count = #envs
if count == 0 then
    return {0, unpack(skipped)}
end
redis.call('SADD', KEYS[1], ttype)
redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'enqueued', count)

if delay > 0 then
    local dkey = prefix .. 'delayed:' .. ttype
    local due = now + delay
    local before = redis.call('ZRANGE', dkey, 0, 0, 'WITHSCORES')
    for _, e in ipairs(envs) do
        redis.call('ZADD', dkey, due, stamp_json(e[1], 'enqueued_ms', enqueued_ms))
    end
    if before[2] == nil or tonumber(before[2]) > due then
        redis.call('RPUSH', prefix .. 'wake:scheduler', '1')
        redis.call('LTRIM', prefix .. 'wake:scheduler', -WAKE_CAP, -1)
    end
    return {count, unpack(skipped)}
end

--! inline lib/queued.lua
-- The per-type ready count {ns}:QUEUED (hash T -> tasks in q:T:0..9): every
-- script that pushes to or removes from a ready list moves it by the same
-- number in the same call, so the controller reads one HMGET instead of ten
-- LLENs per type (docs/schema.md, "The ready count").  The including script
-- defines `prefix` ("{ns}:").  A producer that pushes without it is caught
-- up by the scheduler's recount (queued_recount.lua).
--
-- count_queued(ttype, n): QUEUED[ttype] += n (n < 0 for tasks taken out).
local function count_queued(ttype, n)
    if n ~= 0 then
        redis.call('HINCRBY', prefix .. 'QUEUED', ttype, n)
    end
end
--! end inline
count_queued(ttype, count)
local was_empty = false
local pushed = {}
for _, e in ipairs(envs) do
    local qkey = prefix .. 'q:' .. ttype .. ':' .. e[2]
    local len = redis.call('RPUSH', qkey, stamp_json(e[1], 'enqueued_ms', enqueued_ms))
    if not pushed[qkey] then
        pushed[qkey] = true
        if len == 1 then
            was_empty = true
        end
    end
end
local wkey = prefix .. 'wake:' .. ttype
local tokens = {}
for i = 1, math.min(count, WAKE_CAP) do
    tokens[i] = '1'
end
redis.call('RPUSH', wkey, unpack(tokens))
redis.call('LTRIM', wkey, -WAKE_CAP, -1)
if was_empty then
    redis.call('PUBLISH', prefix .. 'demand', ttype)
end
return {count, unpack(skipped)}
