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
