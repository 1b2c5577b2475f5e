-- cancel: cancel task ID.  A task still queued or delayed is removed, in
-- this one atomic step, so no worker can claim it afterwards; a running task
-- is flagged and its function may notice (current_task().cancelled).
--
-- KEYS[1]  {ns}:types     set of task types (names the slot; searched when T is "")
-- KEYS[2]  {ns}:workers   zset of live workers (their in-flight hashes are checked)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  the task id
-- ARGV[3]  T, the task's type if known ("" = search every type)
-- ARGV[4]  seconds the flag {ns}:cancel:ID is kept ("1" for a running task;
--          "removed:T" for one removed, so task_lookup.lua can say "cancelled")
-- ARGV[5]  most ready-list entries read per type before giving up the search
-- ARGV[6]  F, a fan-out id (optional, "" = none): also search F's pending list
--          ({ns}:fanout:F:pending, sub-tasks not yet released), at most
--          ARGV[5] entries
--
-- Removed (queued or delayed): stats "cancelled" +1; a unique task releases
-- its key; a fan-out sub-task counts as failed for its fan-out and its slot
-- passes on; an RPC caller gets {"id", "ok": false, "error_type":
-- "Cancelled", "error"} on its reply list.  ACTIVE_TASKS is not touched: the
-- task never ran.  The enqueued counter stays: the task was enqueued.
--
-- Removed from F's pending list: the same, except that the sub-task held no
-- slot (none is passed on) and was never counted in "enqueued" (a fan-out
-- counts a sub-task when it releases it).
--
-- Returns {"running", W} | {"queued", T} | {"delayed", T} | {"pending", F} |
-- {"unknown", ""} (unknown: finished, never enqueued, or beyond the search
-- limit).
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix, wanted, given, flag_ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local fanout = ARGV[6] or ''
--! include lib/clock.lua
--! include lib/wake_cap.lua

--! include lib/ready.lua
--! include lib/fanout_final.lua
--! include lib/unique_release.lua
--! include lib/queued.lua
--! include lib/key_types.lua

-- the keys finish() writes, checked before the task is removed: a wrong type
-- is the error "BADKEY <key> ..." and nothing is written (lib/key_types.lua)
local function finish_problem(ttype, doc)
    local f = doc and type(doc.fanout) == 'string' and doc.fanout ~= '' and doc.fanout
    return wrong_key({prefix .. 'stats:' .. ttype, 'hash', doc and reply_key(doc.reply_to) or false, 'list',
        f and prefix .. 'fanout:' .. f or false, 'hash'})
end

for _, worker in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if redis.call('HEXISTS', prefix .. 'inflight:' .. worker, wanted) == 1 then
        redis.call('SET', prefix .. 'cancel:' .. wanted, '1', 'EX', flag_ttl)
        return {'running', worker}
    end
end

local function finish(ttype, env, doc, unreleased)
    redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'cancelled', 1)
    redis.call('SET', prefix .. 'cancel:' .. wanted, string.format('removed:%s', ttype), 'EX', flag_ttl)
    unique_release(env)
    local reply = cjson.encode({id = wanted, ok = false, error_type = 'Cancelled',
                                error = 'the task was cancelled before it ran'})
    if doc and type(doc.fanout) == 'string' and doc.fanout ~= '' then
        fanout_final(doc.fanout, 'failed', env, reply, unreleased)
    end
    local rkey = doc and reply_key(doc.reply_to)
    if rkey then  -- only a reply key of the namespace, never a queue or any other key
        redis.call('RPUSH', rkey, reply)
        local ttl = tonumber(doc.reply_ttl) or 300
        redis.call('EXPIRE', rkey, math.max(1, math.floor(ttl)))
    end
end

local needle = '"' .. wanted .. '"'

-- Find the entry of list `key` whose id is `wanted`, reading at most `most`
-- entries (in chunks); LREM it and return it with its decoded document, or
-- nil and how many entries were read (and the BADKEY error of a key of
-- type `ttype` the cancel would write, when one is wrong: nothing removed).
local function take_from_list(key, most, ttype)
    local size = redis.call('LLEN', key)
    local start, read = 0, 0
    while start < size and start < most do
        local chunk = redis.call('LRANGE', key, start, start + 999)
        for _, env in ipairs(chunk) do
            if string.find(env, needle, 1, true) then
                local _, id, doc = level_and_id(env)
                if id == wanted then
                    local bad = finish_problem(ttype, doc)
                    if bad then
                        return nil, nil, 0, bad
                    end
                    redis.call('LREM', key, 1, env)
                    return env, doc
                end
            end
        end
        read = read + #chunk
        start = start + 1000
    end
    return nil, nil, read
end

if fanout ~= '' then
    local ftype = redis.call('HGET', prefix .. 'fanout:' .. fanout, 'type')
    if ftype then
        local env, doc, _, bad = take_from_list(prefix .. 'fanout:' .. fanout .. ':pending', limit, ftype)
        if bad then
            return bad
        end
        if env then
            finish(ftype, env, doc, true)
            return {'pending', fanout}
        end
        if given == '' then  -- released already: a sub-task of F is of F's type
            given = ftype
        end
    end
end
local types = {given}
if given == '' then
    types = redis.call('SMEMBERS', KEYS[1])
end
for _, ttype in ipairs(types) do
    local dkey = prefix .. 'delayed:' .. ttype
    for _, env in ipairs(redis.call('ZRANGE', dkey, 0, -1)) do
        if string.find(env, needle, 1, true) then
            local _, id, doc = level_and_id(env)
            if id == wanted then
                local bad = finish_problem(ttype, doc)
                if bad then
                    return bad
                end
                redis.call('ZREM', dkey, env)
                finish(ttype, env, doc)
                return {'delayed', ttype}
            end
        end
    end
    local read = 0  -- the queues of a type share one read limit
    for level = 0, 9 do
        local env, doc, seen, bad = take_from_list(prefix .. 'q:' .. ttype .. ':' .. level, limit - read, ttype)
        if bad then
            return bad
        end
        if env then
            count_queued(ttype, -1)
            finish(ttype, env, doc)
            return {'queued', ttype}
        end
        read = read + seen
    end
end
return {'unknown', ''}
