-- admin_delayed: run one delayed task of type T now, or delete it.  The
-- delayed set's members are whole envelopes, so the task is found by
-- decoding each member's id (O(size of delayed:T)).
--
-- KEYS[1]  {ns}:types   set of task types (names the slot)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  T
-- ARGV[3]  "run_now" or "delete"
-- ARGV[4]  the task id
--
-- run_now: ZREM, then the TAIL of q:T:P with "due_ms":now appended (as the
-- scheduler's promote does, only earlier); wake token; demand signal.  No
-- counter changes: the task was counted as enqueued when it was scheduled.
-- delete: ZREM; stats "purged" +1; a fan-out sub-task (a retry waiting in
-- the set) is counted as failed for its fan-out and its slot passes on, and
-- a unique task releases its key, as when it is dead-lettered.  ACTIVE_TASKS
-- is never touched.
--
-- Returns 1 if the task was found (and moved or deleted), else 0.
--
-- Errors: none

local prefix, ttype, mode, wanted = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--! include lib/clock.lua
local WAKE_CAP = 64
local dkey = prefix .. 'delayed:' .. ttype

--! include lib/stamp.lua
--! include lib/ready.lua
--! include lib/fanout_final.lua
--! include lib/unique_release.lua

local needle = '"' .. wanted .. '"'
for _, env in ipairs(redis.call('ZRANGE', dkey, 0, -1)) do
    if string.find(env, needle, 1, true) then
        local level, id, doc = level_and_id(env)
        if id == wanted then
            redis.call('ZREM', dkey, env)
            if mode == 'run_now' then
                to_ready(ttype, level, stamp_json(env, 'due_ms', string.format('%d', now)))
            else
                redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'purged', 1)
                unique_release(env)
                if type(doc.fanout) == 'string' and doc.fanout ~= '' then
                    fanout_final(doc.fanout, 'failed', env, nil)
                end
            end
            return 1
        end
    end
end
return 0
