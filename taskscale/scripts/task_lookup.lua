-- task_lookup: where is task ID now?  Read-only; one script so the answer is
-- a consistent snapshot (a task moving between lists during the lookup is
-- never missed nor seen twice).  No per-task index exists (it would cost a
-- write per transition of every task), so the lookup is cheap where the
-- task is addressed by id and a bounded scan where it is not:
--
--   running   HGET inflight:W ID for every W in the workers zset
--   cancelled GET cancel:ID, when it is nowhere else (cancel.lua's flag, 24 h)
--   done      reply:ID (only RPC tasks keep an outcome, until read or expired)
--   queued    q:T:P lists     } scanned for the id, in chunks of 1000,
--   delayed   delayed:T zset  } over the given type or every type in the
--   dead      dead:T list     } types set, at most `limit` entries in all
--
-- KEYS[1]  {ns}:types    set of task types
-- KEYS[2]  {ns}:workers  zset W -> lease expiry
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  ID
-- ARGV[3]  T to search, or "" for every type
-- ARGV[4]  limit: most list/zset entries to examine
--
-- Returns {state, type, where, payload}:
--   {"running", T, W, envelope}      {"queued", T, P, envelope}
--   {"delayed", T, due unix ms, envelope}
--   {"dead", T, "", dead-letter record JSON}
--   {"done", "", "", reply JSON}
--   {"cancelled", T, "before it ran", ""}  (removed by cancel.lua, flag kept)
--   {"cancelled", "", "while running", ""} (flagged while it ran, now finished)
--   {"unknown", "", examined, ""}    {"limit", "", examined, ""} (scan cut short)
--
-- Errors: none

local prefix, id, only = ARGV[1], ARGV[2], ARGV[3]
local limit = tonumber(ARGV[4]) or 200000
local needle = '"' .. id .. '"'
local CHUNK = 1000
local examined = 0

local function matches(env)
    if not string.find(env, needle, 1, true) then
        return false
    end
    local ok, doc = pcall(cjson.decode, env)
    return ok and type(doc) == 'table' and doc.id == id
end

for _, w in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    local env = redis.call('HGET', prefix .. 'inflight:' .. w, id)
    if env then
        local ok, doc = pcall(cjson.decode, env)
        local ttype = ok and type(doc) == 'table' and doc.type or ''
        return {'running', tostring(ttype), w, env}
    end
end

local reply = redis.call('LRANGE', prefix .. 'reply:' .. id, 0, 0)
if reply[1] then
    return {'done', '', '', reply[1]}
end

local types = redis.call('SMEMBERS', KEYS[1])
if only ~= '' then
    types = {only}
end

-- scan(key, kind): the first entry of list/zset `key` whose id matches, or nil;
-- sets `cut` when the limit stopped it.
local cut = false
local function scan(key, kind)
    local start = 0
    while true do
        if examined >= limit then
            cut = true
            return nil
        end
        local stop = start + math.min(CHUNK, limit - examined) - 1
        local got
        if kind == 'zset' then
            got = redis.call('ZRANGE', key, start, stop, 'WITHSCORES')
        else
            got = redis.call('LRANGE', key, start, stop)
        end
        local step = kind == 'zset' and 2 or 1
        for i = 1, #got, step do
            local entry = got[i]
            if kind == 'dead' then
                local ok, rec = pcall(cjson.decode, entry)
                if ok and type(rec) == 'table' and type(rec.envelope) == 'string'
                        and matches(rec.envelope) then
                    return entry
                end
            elseif matches(entry) then
                return entry, got[i + 1]
            end
        end
        local n = #got / step
        examined = examined + n
        if n < stop - start + 1 then
            return nil
        end
        start = stop + 1
    end
end

for _, ttype in ipairs(types) do
    for level = 0, 9 do
        local env = scan(prefix .. 'q:' .. ttype .. ':' .. level, 'list')
        if env then
            return {'queued', ttype, tostring(level), env}
        end
    end
    local env, due = scan(prefix .. 'delayed:' .. ttype, 'zset')
    if env then
        return {'delayed', ttype, due, env}
    end
    local rec = scan(prefix .. 'dead:' .. ttype, 'dead')
    if rec then
        return {'dead', ttype, '', rec}
    end
end
if not cut then
    local flag = redis.call('GET', prefix .. 'cancel:' .. id)
    if flag and string.sub(flag, 1, 8) == 'removed:' then
        return {'cancelled', string.sub(flag, 9), 'before it ran', ''}
    elseif flag then
        return {'cancelled', '', 'while running', ''}
    end
end
return {cut and 'limit' or 'unknown', '', tostring(examined), ''}
