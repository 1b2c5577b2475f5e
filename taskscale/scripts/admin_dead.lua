-- admin_dead: requeue or purge dead letters of type T, all of them or those
-- whose envelope id is given.  One atomic step: a record is requeued or
-- purged exactly once even when two operators act at the same time.
--
-- KEYS[1]  {ns}:types   set of task types (names the slot; SADD on requeue)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  T
-- ARGV[3]  "requeue" or "purge"
-- ARGV[4..] task ids; none = every dead letter of T
--
-- requeue: the envelope goes to the TAIL of its ready list q:T:P with
-- "attempts":0, "reaped":0 and "due_ms":now appended (queue wait counts from
-- the requeue) and "fanout":"" (a fan-out already counted the sub-task as
-- failed and released its slot; the rerun is an ordinary task); wake token;
-- demand signal; stats "dead_requeued" and "enqueued".  A record whose
-- envelope does not decode is left in place (nothing to requeue).
-- purge: the record is deleted; stats "dead_purged".
-- ACTIVE_TASKS is never touched: a dead letter is not running.
--
-- Returns the number of records requeued or purged.
--
-- Errors: none

local prefix, ttype, mode = ARGV[1], ARGV[2], ARGV[3]
--! include lib/clock.lua
local dkey = prefix .. 'dead:' .. ttype
local skey = prefix .. 'stats:' .. ttype

--! include lib/stamp.lua
--! include lib/ready.lua

local wanted, all = {}, #ARGV < 4
for i = 4, #ARGV do
    wanted[ARGV[i]] = true
end

local done = 0
local records = redis.call('LRANGE', dkey, 0, -1)
for _, rec in ipairs(records) do
    local ok, doc = pcall(cjson.decode, rec)
    local env = ok and type(doc) == 'table' and doc.envelope or nil
    local level, id = 5, nil
    if type(env) == 'string' then
        level, id = level_and_id(env)
    end
    if all or (id and wanted[id]) then
        if mode == 'purge' then
            done = done + redis.call('LREM', dkey, 1, rec)
        elseif id and redis.call('LREM', dkey, 1, rec) == 1 then
            env = stamp_json(env, 'attempts', '0')
            env = stamp_json(env, 'reaped', '0')
            env = stamp_json(env, 'fanout', '""')
            env = stamp_json(env, 'due_ms', string.format('%d', now))
            to_ready(ttype, level, env)
            done = done + 1
        end
    end
end
if done > 0 then
    if mode == 'purge' then
        redis.call('HINCRBY', skey, 'dead_purged', done)
    else
        redis.call('SADD', KEYS[1], ttype)
        redis.call('HINCRBY', skey, 'dead_requeued', done)
        redis.call('HINCRBY', skey, 'enqueued', done)
    end
end
return done
