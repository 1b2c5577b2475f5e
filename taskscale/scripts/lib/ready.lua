-- An envelope's priority level and id, and the push to the TAIL of its ready
-- list, shared by the admin scripts and cancel.lua (inlined by the include
-- directive of luascripts.py).  The including script defines `prefix`
-- ("{ns}:").
--
-- level_and_id(env): the priority level of an envelope (5 if missing or
-- invalid), its id (nil if not a string) and the decoded document (nil if
-- env is not a JSON object or array).
--! include lib/wake_cap.lua
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

-- to_ready(ttype, level, env): RPUSH env to q:T:P (QUEUED[T] + 1), a wake
-- token, and the demand signal when the list goes from empty to non-empty.

--! include lib/queued.lua

local function to_ready(ttype, level, env)
    local qkey = prefix .. 'q:' .. ttype .. ':' .. level
    count_queued(ttype, 1)
    if redis.call('RPUSH', qkey, env) == 1 then
        redis.call('PUBLISH', prefix .. 'demand', ttype)
    end
    redis.call('RPUSH', prefix .. 'wake:' .. ttype, '1')
    redis.call('LTRIM', prefix .. 'wake:' .. ttype, -WAKE_CAP, -1)
end
