-- complete: record a batch of tasks that returned normally, for worker W.
-- A task counts only if it was still in W's in-flight hash, so a task the
-- reaper took back meanwhile (or a retried call) is never counted twice.
-- A unique task's key is released (lib/unique_release.lua).
--
-- KEYS[1]  {ns}:ACTIVE_TASKS  hash T -> tasks running now (never below 0)
-- KEYS[2]  {ns}:IDLE_SINCE    hash T -> unix seconds the last task finished
-- KEYS[3]  {ns}:inflight:W    hash task id -> envelope
-- KEYS[4]  {ns}:limits        hash T -> JSON limits (optional): a finished task
--          of a type with a concurrency cap pushes a wake token when more wait
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  n, the number of tasks; then 7 values per task:
--          id, T, service ms, reply key ("" = none), reply TTL seconds,
--          reply JSON (the whole {"id", "ok": true, "result"} object; also
--          the sub-task's result when its fan-out collects results),
--          the fan-out id F ("" = none)
--
-- Returns the number of tasks recorded.  Stats "active_underflow" counts
-- decrements that would have taken ACTIVE_TASKS below 0 (it should stay 0).
-- A key of the wrong type is the error "BADKEY <key> ..." and nothing is
-- written (lib/key_types.lua); a reply key that is not {ns}:reply:<id> is
-- never written.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix = ARGV[1]
local n = tonumber(ARGV[2])
--! include lib/clock.lua
--! include lib/wake_cap.lua

--! include lib/fanout_final.lua
--! include lib/unique_release.lua
--! include lib/limits.lua
--! include lib/workflow.lua
--! include lib/key_types.lua

local checks = {KEYS[1], 'hash', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4] or false, 'hash'}
for i = 0, n - 1 do
    local base = 3 + i * 7
    local ttype, f = ARGV[base + 1], ARGV[base + 6]
    for _, c in ipairs({prefix .. 'stats:' .. ttype, 'hash', prefix .. 'wake:' .. ttype, 'list',
        reply_key(ARGV[base + 3]) or false, 'list', f ~= '' and prefix .. 'fanout:' .. f or false, 'hash'}) do
        checks[#checks + 1] = c
    end
end
local bad = wrong_key(checks)
if bad then
    return bad
end

local done, service = {}, {}
local recorded = 0
for i = 0, n - 1 do
    local base = 3 + i * 7
    local id, ttype, ms = ARGV[base], ARGV[base + 1], tonumber(ARGV[base + 2])
    local env = redis.call('HGET', KEYS[3], id)
    if env then
        redis.call('HDEL', KEYS[3], id)
        unique_release(env)
        recorded = recorded + 1
        done[ttype] = (done[ttype] or 0) + 1
        service[ttype] = (service[ttype] or 0) + ms
        local rkey = reply_key(ARGV[base + 3])
        if rkey then
            redis.call('RPUSH', rkey, ARGV[base + 5])
            redis.call('EXPIRE', rkey, tonumber(ARGV[base + 4]) or 300)
        end
        if ARGV[base + 6] ~= '' then
            fanout_final(ARGV[base + 6], 'succeeded', env, ARGV[base + 5])
        end
        wf_step_final(env, 'succeeded', ARGV[base + 5])  -- a workflow step: its dependants
    end
end

local idle = seconds_text(now)
for ttype, count in pairs(done) do
    local left = redis.call('HINCRBY', KEYS[1], ttype, -count)
    local skey = prefix .. 'stats:' .. ttype
    if left < 0 then
        redis.call('HSET', KEYS[1], ttype, 0)
        redis.call('HINCRBY', skey, 'active_underflow', -left)
    end
    redis.call('HSET', KEYS[2], ttype, idle)
    redis.call('HINCRBY', skey, 'completed', count)
    redis.call('HINCRBY', skey, 'service_ms', service[ttype])
    cap_wake(KEYS[4], ttype)
end
return recorded
