-- Unique-key release, shared by complete.lua, fail.lua (dead-letter) and
-- cancel.lua (inlined by the include directive of luascripts.py).  The
-- including script defines `prefix` ("{ns}:"); `now` comes from lib/clock.lua.
--
-- unique_release(env): the task of envelope `env` reached its final outcome.
-- If it carries "unique_key" and {ns}:unique:<key> still names this task,
-- the key is deleted -- or kept until enqueued_ms + unique_for_ms when that
-- is later (the uniqueness window).  Envelopes without the field cost one
-- plain string search, no JSON decode.
--! include lib/clock.lua

local function unique_release(env)
    if not env or not string.find(env, '"unique_key"', 1, true) then
        return
    end
    local ok, doc = pcall(cjson.decode, env)
    if not ok or type(doc) ~= 'table' or type(doc.unique_key) ~= 'string' then
        return
    end
    local ukey = prefix .. 'unique:' .. doc.unique_key
    if redis.call('TYPE', ukey).ok ~= 'string' or redis.call('GET', ukey) ~= doc.id then
        return
    end
    local until_ms = (tonumber(doc.enqueued_ms) or 0) + (tonumber(doc.unique_for_ms) or 0)
    if until_ms > now then
        redis.call('PEXPIREAT', ukey, math.floor(until_ms))
    else
        redis.call('DEL', ukey)
    end
end
