-- Envelope field stamping without re-encoding, shared by the admin scripts
-- (inlined by the include directive of luascripts.py).  cjson would turn an
-- empty "args": [] into {}, so an envelope is never decoded and encoded
-- again: a field is appended as the object's last member, which wins over an
-- earlier one of the same name in every JSON decoder taskscale uses.
--
-- stamp_json(env, field, json_text): env with ,"field":json_text appended
-- (env unchanged if it is not an object).
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

-- The priority level of an envelope (5 if missing or invalid) and its id.
local function level_and_id(env)
    local ok, doc = pcall(cjson.decode, env)
    local level, id = 5, nil
    if ok and type(doc) == 'table' then
        local p = doc.priority
        if type(p) == 'number' and p == math.floor(p) and p >= 0 and p <= 9 then
            level = p
        end
        if type(doc.id) == 'string' then
            id = doc.id
        end
        return level, id, doc
    end
    return level, id, nil
end

-- Push an envelope to the TAIL of its ready list: a wake token, and the
-- demand signal when the list goes from empty to non-empty.
local function to_ready(ttype, level, env)
    local qkey = prefix .. 'q:' .. ttype .. ':' .. level
    if redis.call('RPUSH', qkey, env) == 1 then
        redis.call('PUBLISH', prefix .. 'demand', ttype)
    end
    redis.call('RPUSH', prefix .. 'wake:' .. ttype, '1')
    redis.call('LTRIM', prefix .. 'wake:' .. ttype, -64, -1)
end
