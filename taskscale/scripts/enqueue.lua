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
-- ARGV[5..] envelopes: JSON objects with at least "id" and "type" (= T),
--          valid by the rules of docs/schema.md (lib/envelope_rules.lua);
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
-- invalid envelope is an error "invalid envelope #i: reason" and nothing
-- at all is written; so is a key of the wrong type ("BADKEY <key> ...").
--
-- Errors: `invalid envelope #<i>: <n> bytes is over the limit of <ARGV[4]>`
--         `invalid envelope #<i>: not a JSON object`
--         `invalid envelope #<i>: not UTF-8`
--         `invalid envelope #<i>: not JSON (NaN, Infinity, hex or a control character)`
--         `invalid envelope #<i>: "<field>" is missing`
--         `invalid envelope #<i>: "<field>" must be <rule>` (docs/schema.md, "Validation rules")
--         `invalid envelope #<i>: "type" must be <T>`
--         `invalid envelope #<i>: "<field>" is nested deeper than 32 levels`
--         `BADKEY <key> is a <found>, not a <wanted>`
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

--! inline lib/envelope_rules.lua
-- The envelope's validation rules (docs/schema.md, "Validation rules"): the
-- Lua twin of taskscale/envelope_rules.py, which the Python producer and
-- worker go by; tests/envelope/test_rules_agree.py feeds both the same
-- envelopes.  Inlined into enqueue.lua (a standalone script: a copy).
--
-- envelope_problem(env, ttype, prefix): nil when the JSON text env is an
-- envelope of type ttype a worker can run, else one line naming the field.
-- It also returns the decoded priority (0-9, default 5).
local RULE_MAX_INT = 9007199254740991
local RULE_MAX_MS = 315360000000
local RULE_MAX_S = 315360000
local RULE_MAX_DEPTH = 32
local RULE_NAME = '^[%w_%.%-]+$'

local function rule_int(least, most)
    local text = string.format('must be an integer %.0f to %.0f', least, most)
    return function(v)
        if type(v) == 'number' and v == v and v == math.floor(v) and v >= least and v <= most then
            return nil
        end
        return text
    end
end

local function rule_name(v)
    if type(v) == 'string' and #v >= 1 and #v <= 128 and string.match(v, RULE_NAME) then
        return nil
    end
    return 'must be 1-128 characters of A-Z a-z 0-9 _ . -'
end

-- cjson reads [] and {} alike: an empty table is both an array and an object
local function rule_array(v)
    if type(v) == 'table' and (next(v) == nil or type(next(v)) == 'number') then
        return nil
    end
    return 'must be an array'
end

local function rule_object(v)
    if type(v) == 'table' and (next(v) == nil or type(next(v)) == 'string') then
        return nil
    end
    return 'must be an object'
end

local rule_ms = rule_int(0, RULE_MAX_MS)
local function rule_backoff(v)
    local text = string.format('must be an integer 1 to %.0f or a list of 1-100 integers 0 to %.0f',
        RULE_MAX_MS, RULE_MAX_MS)
    if type(v) == 'table' then
        if next(v) == nil or type(next(v)) ~= 'number' or #v > 100 then
            return text
        end
        for _, step in ipairs(v) do
            if rule_ms(step) then
                return text
            end
        end
        return nil
    end
    if rule_int(1, RULE_MAX_MS)(v) then
        return text
    end
    return nil
end

local RULES = {
    id = rule_name,
    type = rule_name,
    args = rule_array,
    kwargs = rule_object,
    priority = rule_int(0, 9),
    enqueued_ms = rule_int(0, RULE_MAX_INT),
    due_ms = rule_int(0, RULE_MAX_INT),
    attempts = rule_int(0, RULE_MAX_INT),
    max_retries = rule_int(0, RULE_MAX_INT),
    retry_backoff_ms = rule_backoff,
    retry_backoff_max_ms = rule_int(1, RULE_MAX_MS),
    timeout_ms = rule_int(1, RULE_MAX_MS),
    reply_ttl = rule_int(1, RULE_MAX_S),
    fanout = rule_name,
    fanout_seq = rule_int(0, RULE_MAX_INT),
    fanout_collect = function(v)
        if type(v) == 'boolean' then
            return nil
        end
        return 'must be true or false'
    end,
    unique_key = function(v)
        if type(v) == 'string' and #v >= 1 and #v <= 200 and string.match(v, '^[%w_%.%-:]+$') then
            return nil
        end
        return 'must be 1-200 characters of A-Z a-z 0-9 _ . - :'
    end,
    unique_for_ms = rule_ms,
    reaped = rule_int(0, RULE_MAX_INT),
}

local function rule_depth(t, limit)
    if type(t) ~= 'table' or limit <= 0 then
        return 0
    end
    local deepest = 0
    for _, v in pairs(t) do
        if type(v) == 'table' then
            local d = rule_depth(v, limit - 1)
            if d > deepest then
                deepest = d
            end
            if deepest >= limit - 1 then
                break
            end
        end
    end
    return 1 + deepest
end

-- strict UTF-8 (no overlong forms, no surrogates), as the Python worker reads it
local function rule_utf8(s)
    local i = 1
    while true do
        i = string.find(s, '[\128-\255]', i)
        if not i then
            return true
        end
        local c, len = string.byte(s, i), 0
        if c >= 0xC2 and c <= 0xDF then
            len = 1
        elseif c >= 0xE0 and c <= 0xEF then
            len = 2
        elseif c >= 0xF0 and c <= 0xF4 then
            len = 3
        else
            return false
        end
        for k = 1, len do
            local b = string.byte(s, i + k)
            if not b or b < 0x80 or b > 0xBF then
                return false
            end
        end
        local b1 = string.byte(s, i + 1)
        if (c == 0xE0 and b1 < 0xA0) or (c == 0xED and b1 > 0x9F) or (c == 0xF0 and b1 < 0x90)
            or (c == 0xF4 and b1 > 0x8F) then
            return false
        end
        i = i + len + 1
    end
end

local function rule_number(tok)
    if tok == 'true' or tok == 'false' or tok == 'null' then
        return true
    end
    local int, frac, exp = string.match(tok, '^%-?(%d+)(%.?%d*)(.*)$')
    if not int or (#int > 1 and string.sub(int, 1, 1) == '0') or frac == '.' then
        return false
    end
    return exp == '' or string.match(exp, '^[eE][-+]?%d+$') ~= nil
end

-- cjson also reads NaN, Infinity, hex, "+1", "01", "1." and raw control
-- characters in strings, which JSON (and the Python worker) refuse: the bare
-- tokens outside strings and the strings' bytes are checked when a cheap look
-- says one may be there
local function rule_plain_json(s)
    if not (string.find(s, '[%z\1-\31]') or string.find(s, '[:,%[]%s*[-+]?[NIniXx+]')
        or string.find(s, '[:,%[]%s*%-?0[%w]') or string.find(s, '%d%.[^%d]')) then
        return true
    end
    local i, n = 1, #s
    while i <= n do
        local q = string.find(s, '"', i, true)
        for tok in string.gmatch(string.sub(s, i, (q or n + 1) - 1), '[^%s%[%]{}:,]+') do
            if not rule_number(tok) then
                return false
            end
        end
        if not q then
            return true
        end
        local j = q + 1
        while true do
            local e = string.find(s, '["\\]', j)
            if not e then
                return true  -- unterminated: cjson refused it already
            end
            if string.find(string.sub(s, j, e - 1), '[%z\1-\31]') then
                return false
            end
            if string.sub(s, e, e) == '"' then
                j = e + 1
                break
            end
            j = e + 2
        end
        i = j
    end
    return true
end

local function envelope_problem(env, ttype, prefix)
    local ok, doc = pcall(cjson.decode, env)
    if not ok or type(doc) ~= 'table' or (next(doc) ~= nil and type(next(doc)) ~= 'string') then
        return 'not a JSON object'
    end
    if not rule_utf8(env) then
        return 'not UTF-8'
    end
    if not rule_plain_json(env) then
        return 'not JSON (NaN, Infinity, hex or a control character)'
    end
    for _, name in ipairs({'id', 'type'}) do
        if doc[name] == nil then
            return '"' .. name .. '" is missing'
        end
    end
    for name, v in pairs(doc) do
        local rule = RULES[name]
        local why = nil
        if rule then
            why = rule(v)
        elseif name == 'reply_to' then
            local rest = type(v) == 'string' and string.sub(v, 1, #prefix) == prefix
                and string.match(string.sub(v, #prefix + 1), '^reply:([%w_%.%-]+)$')
            if not rest or #rest > 128 then
                why = 'must be a reply key ' .. prefix .. 'reply:<id>'
            end
        end
        if why then
            return '"' .. name .. '" ' .. why
        end
    end
    if doc.type ~= ttype then
        return '"type" must be ' .. ttype
    end
    for _, name in ipairs({'args', 'kwargs'}) do
        if rule_depth(doc[name], RULE_MAX_DEPTH + 1) > RULE_MAX_DEPTH then
            return '"' .. name .. '" is nested deeper than ' .. RULE_MAX_DEPTH .. ' levels'
        end
    end
    return nil, doc.priority or 5, doc
end
--! end inline

-- validate everything first: all or nothing
local levels, uniq = {}, {}
for i = 5, #ARGV do
    local n = i - 4
    local env = ARGV[i]
    if max_bytes > 0 and #env > max_bytes then
        return redis.error_reply('invalid envelope #' .. n .. ': ' .. #env .. ' bytes is over the limit of ' .. max_bytes)
    end
    local why, p, doc = envelope_problem(env, ttype, prefix)
    if why then
        return redis.error_reply('invalid envelope #' .. n .. ': ' .. why)
    end
    levels[n] = p
    if doc.unique_key ~= nil then
        uniq[n] = {doc.unique_key, doc.id}
    end
end

--! inline lib/key_types.lua
-- Checking key types before writing anything (docs/operating.md, "A key of
-- the wrong type"): a script that meets a key of another type than the
-- schema's (a string where a hash belongs: a mistake by hand, another
-- program) stops before its first write, so nothing is half done.  The
-- including script defines `prefix` ("{ns}:") first.
--
-- wrong_key(checks): checks = {key1, 'hash', key2, 'list', ...} (a nil key
-- is skipped); nil when every key is absent or of its type, else the error
-- reply "BADKEY <key> is a <type>, not a <type>": the one shape the Python
-- side reads (taskscale/key_types.py), which names the key.
-- reply_key(key): key when it is a reply key of this namespace
-- ({ns}:reply:<id>), else nil: a worker writes and expires no other key.
local function wrong_key(checks)
    for i = 1, #checks, 2 do
        local key = checks[i]
        if key then
            local found = redis.call('TYPE', key).ok
            if found ~= 'none' and found ~= checks[i + 1] then
                return redis.error_reply('BADKEY ' .. key .. ' is a ' .. found .. ', not a ' .. checks[i + 1])
            end
        end
    end
    return nil
end

local function reply_key(key)
    if type(key) == 'string' and string.sub(key, 1, #prefix) == prefix then
        local id = string.match(string.sub(key, #prefix + 1), '^reply:([%w_%.%-]+)$')
        if id and #id <= 128 then
            return key
        end
    end
    return nil
end
--! end inline

-- every key this call may write, checked before the first write
local checks = {KEYS[1], 'set', prefix .. 'stats:' .. ttype, 'hash', prefix .. 'wake:' .. ttype, 'list',
    prefix .. 'delayed:' .. ttype, 'zset', prefix .. 'wake:scheduler', 'list'}
for n, p in pairs(levels) do
    checks[#checks + 1] = prefix .. 'q:' .. ttype .. ':' .. p
    checks[#checks + 1] = 'list'
    if uniq[n] then
        checks[#checks + 1] = prefix .. 'unique:' .. uniq[n][1]
        checks[#checks + 1] = 'string'
    end
end
local bad = wrong_key(checks)
if bad then
    return bad
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
