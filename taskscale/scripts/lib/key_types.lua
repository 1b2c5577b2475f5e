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
