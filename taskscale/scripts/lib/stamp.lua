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
