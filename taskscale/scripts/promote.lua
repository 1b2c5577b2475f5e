-- promote: move every delayed task that is due (bounded batch per type) to
-- the TAIL of its ready list, keeping its priority, and report when the next
-- one is due.  One atomic step per call, so any number of schedulers may run
-- it at once with no lock: a task is promoted exactly once.
--
-- KEYS[1]  {ns}:types  set of task types (each has {ns}:delayed:T)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  most tasks to promote per type in this call
--
-- Returns {promoted, next due unix ms (-1 = none), now unix ms, more, late}
-- where more = 1 if some type still has due tasks (call again at once) and
-- late = now - the earliest due time promoted in this call, in ms (how late
-- the most overdue task was; 0 if none was promoted), and, only when some
-- type was skipped, wrong = the
-- errors "BADKEY <key> ..." of the types skipped because a key of theirs has
-- the wrong type (lib/key_types.lua): the other types are promoted.
-- Each promoted envelope gets "due_ms" (its score) appended, so queue wait
-- is measured from when it became due.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix = ARGV[1]
local limit = tonumber(ARGV[2]) or 1000
--! include lib/clock.lua

--! include lib/stamp.lua
--! include lib/ready.lua
--! include lib/wake_cap.lua
--! include lib/queued.lua
--! include lib/key_types.lua

local promoted, more, next_due, late = 0, 0, -1, 0
local wrong = {}
local bad_types = wrong_key({KEYS[1], 'set'})
if bad_types then
    return bad_types
end
for _, ttype in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    local dkey = prefix .. 'delayed:' .. ttype
    local checks = {dkey, 'zset', prefix .. 'wake:' .. ttype, 'list'}
    for level = 0, 9 do
        checks[#checks + 1] = prefix .. 'q:' .. ttype .. ':' .. level
        checks[#checks + 1] = 'list'
    end
    local bad = wrong_key(checks)
    local due = {}
    if bad then  -- this type is skipped, the others promoted (lib/key_types.lua)
        wrong[#wrong + 1] = bad.err
    else
        due = redis.call('ZRANGEBYSCORE', dkey, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
    end
    if #due > 0 then
        local was_empty = false
        late = math.max(late, now - tonumber(due[2]))
        for i = 1, #due, 2 do
            local env = due[i]
            redis.call('ZREM', dkey, env)
            local qkey = prefix .. 'q:' .. ttype .. ':' .. level_and_id(env)
            local stamped = stamp_json(env, 'due_ms', string.format('%d', tonumber(due[i + 1])))
            if redis.call('RPUSH', qkey, stamped) == 1 then
                was_empty = true
            end
        end
        local n = #due / 2
        count_queued(ttype, n)
        promoted = promoted + n
        local wkey = prefix .. 'wake:' .. ttype
        local tokens = {}
        for i = 1, math.min(n, WAKE_CAP) do
            tokens[i] = '1'
        end
        redis.call('RPUSH', wkey, unpack(tokens))
        redis.call('LTRIM', wkey, -WAKE_CAP, -1)
        if was_empty then
            redis.call('PUBLISH', prefix .. 'demand', ttype)
        end
    end
    local head = bad and {} or redis.call('ZRANGE', dkey, 0, 0, 'WITHSCORES')
    if head[2] then
        local at = tonumber(head[2])
        if at <= now then
            more = 1
        end
        if next_due < 0 or at < next_due then
            next_due = at
        end
    end
end
if #wrong > 0 then
    return {promoted, next_due, now, more, late, wrong}
end
return {promoted, next_due, now, more, late}
