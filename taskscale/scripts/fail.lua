-- fail: record one failed run of a task for worker W: retry it later
-- through the delayed set, or dead-letter it.  Acts only if HDEL removed the
-- task from W's in-flight hash (a reaped or already-recorded task is left
-- alone).  A dead-lettered unique task releases its key.  The worker decides retry or dead from the envelope's attempts and
-- max_retries, and computes the backoff (with jitter); the due time is taken
-- from TIME here, never from the worker's clock.
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:IDLE_SINCE    hash T -> unix seconds the last task finished
-- KEYS[3]  {ns}:inflight:W    hash task id -> envelope
-- KEYS[4]  {ns}:limits        hash T -> JSON limits (optional): a type with a
--          concurrency cap pushes a wake token when more tasks wait
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  task id
-- ARGV[3]  T
-- ARGV[4]  service ms of this run
-- ARGV[5]  "retry" or "dead"
-- ARGV[6]  retry: backoff ms;                 dead: ignored
-- ARGV[7]  retry: the envelope to schedule    dead: the error message
--          (attempts + 1, no "due_ms")
-- ARGV[8]  dead: reply key ("" = none)
-- ARGV[9]  dead: reply TTL seconds
-- ARGV[10] dead: reply JSON ({"id", "ok": false, "error_type", "error"});
--          also the error kept when the sub-task's fan-out collects results
-- ARGV[11] dead: fan-out id F ("" = none)
-- ARGV[12] dead: the most records dead:T keeps (0 or absent = no cap); the
--          oldest beyond it are dropped and counted in stats "dead_dropped"
-- ARGV[13] dead: the traceback text kept in the record ("" = none)
--
-- Returns 1 if the failure was recorded, 0 if the task was not in flight.
-- A key of the wrong type is the error "BADKEY <key> ..." and nothing is
-- written (lib/key_types.lua); a reply key that is not {ns}:reply:<id> is
-- never written.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix, id, ttype = ARGV[1], ARGV[2], ARGV[3]
--! include lib/clock.lua
--! include lib/wake_cap.lua

--! include lib/fanout_final.lua
--! include lib/unique_release.lua
--! include lib/limits.lua
--! include lib/dead_letter.lua
--! include lib/workflow.lua
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'hash', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4] or false, 'hash',
    prefix .. 'stats:' .. ttype, 'hash', prefix .. 'wake:' .. ttype, 'list',
    prefix .. 'delayed:' .. ttype, 'zset', prefix .. 'wake:scheduler', 'list',
    prefix .. 'dead:' .. ttype, 'list', reply_key(ARGV[8]) or false, 'list',
    (ARGV[11] or '') ~= '' and prefix .. 'fanout:' .. ARGV[11] or false, 'hash'})
if bad then
    return bad
end

local envelope = redis.call('HGET', KEYS[3], id)
if not envelope then
    return 0
end
redis.call('HDEL', KEYS[3], id)

local skey = prefix .. 'stats:' .. ttype
local left = redis.call('HINCRBY', KEYS[1], ttype, -1)
if left < 0 then
    redis.call('HSET', KEYS[1], ttype, 0)
    redis.call('HINCRBY', skey, 'active_underflow', -left)
end
redis.call('HSET', KEYS[2], ttype, seconds_text(now))
redis.call('HINCRBY', skey, 'failed', 1)
redis.call('HINCRBY', skey, 'service_ms', tonumber(ARGV[4]) or 0)
cap_wake(KEYS[4], ttype)

if ARGV[5] == 'retry' then
    local dkey = prefix .. 'delayed:' .. ttype
    local due = now + (tonumber(ARGV[6]) or 0)
    local before = redis.call('ZRANGE', dkey, 0, 0, 'WITHSCORES')
    redis.call('ZADD', dkey, due, ARGV[7])
    redis.call('HINCRBY', skey, 'retried', 1)
    if before[2] == nil or tonumber(before[2]) > due then
        redis.call('RPUSH', prefix .. 'wake:scheduler', '1')
        redis.call('LTRIM', prefix .. 'wake:scheduler', -WAKE_CAP, -1)
    end
    return 1
end

local record = {envelope = envelope, error = ARGV[7], failed_ms = now}
if ARGV[13] and ARGV[13] ~= '' then
    record.traceback = ARGV[13]
end
dead_push(ttype, cjson.encode(record), ARGV[12])
redis.call('HINCRBY', skey, 'dead', 1)
unique_release(envelope)
local rkey = reply_key(ARGV[8])
if rkey then
    redis.call('RPUSH', rkey, ARGV[10])
    redis.call('EXPIRE', rkey, tonumber(ARGV[9]) or 300)
end
if ARGV[11] ~= '' then
    fanout_final(ARGV[11], 'failed', envelope, ARGV[10])
end
wf_step_final(envelope, 'failed', ARGV[10])  -- a workflow step: its policy
return 1
