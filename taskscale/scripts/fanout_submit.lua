-- fanout_submit: create a fan-out request and release its first sub-tasks,
-- atomically (docs/schema.md, "Fan-out accounting").
--
-- KEYS[1]  {NS}:fanout:F           hash: fan-out state (must not exist)
-- KEYS[2]  {NS}:fanout:F:pending   list: sub-task envelopes not yet released
-- KEYS[3]  {NS}:q:T:P              list: the ready list sub-tasks go to
-- KEYS[4]  {NS}:types              set: every task type ever enqueued
-- KEYS[5]  {NS}:stats:T            hash: counters of T (enqueued)
-- KEYS[6]  {NS}:wake:T             list: wake-up tokens of T
-- KEYS[7]  {NS}:fanout:F:done      list: completion notice (0 sub-tasks only)
-- ARGV[1]  F, the fan-out id
-- ARGV[2]  T, the task type
-- ARGV[3]  P, the priority (0-9)
-- ARGV[4]  limit C (>= 1): most sub-tasks released at once
-- ARGV[5]  ttl: seconds the fan-out keys are kept once done
-- ARGV[6]  wake token cap
-- ARGV[7]  demand pub/sub channel ({NS}:demand)
-- ARGV[8.. ] sub-task envelopes: JSON objects without "enqueued_ms"
--
-- Returns the number of sub-tasks released now, or an error reply
-- "FANOUT_EXISTS" when F is already in use.
--
-- Errors: `FANOUT_EXISTS fan-out id <F> is already in use`

local fanout_key, pending_key, queue_key = KEYS[1], KEYS[2], KEYS[3]
local types_key, stats_key, wake_key, done_key = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local fanout_id, task_type, priority = ARGV[1], ARGV[2], ARGV[3]
local limit, ttl, wake_cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local demand_channel = ARGV[7]
local first_envelope = 8
local total = #ARGV - first_envelope + 1

if redis.call('EXISTS', fanout_key) == 1 then
  return redis.error_reply('FANOUT_EXISTS fan-out id ' .. fanout_id .. ' is already in use')
end

--! include lib/clock.lua
-- As a decimal string: tostring() of a large Lua number may use exponent form.
local now_ms = string.format('%d', now)
--! include lib/stamp.lua
local prefix = string.sub(demand_channel, 1, -#'demand' - 1)  -- "{ns}:" of "{ns}:demand"
--! include lib/queued.lua
local released = math.min(limit, total)

redis.call('HSET', fanout_key,
  'type', task_type, 'priority', priority, 'total', total, 'limit', limit,
  'running', released, 'succeeded', 0, 'failed', 0,
  'created_ms', now_ms, 'ttl', ttl)

if total == 0 then
  local notice = cjson.encode({id = fanout_id, total = 0, succeeded = 0, failed = 0})
  redis.call('HSET', fanout_key, 'finished_ms', now_ms)
  redis.call('RPUSH', done_key, notice)
  redis.call('PUBLISH', done_key, notice)
  redis.call('EXPIRE', fanout_key, ttl)
  redis.call('EXPIRE', done_key, ttl)
  return 0
end

-- Push in bounded chunks: unpack() of thousands of values overflows Lua's stack.
local CHUNK = 500
local function push_range(key, from, to, stamp)
  local batch = {}
  for i = from, to do
    local envelope = ARGV[i]
    if stamp then
      envelope = stamp_first(envelope, 'enqueued_ms', now_ms)
    end
    batch[#batch + 1] = envelope
    if #batch == CHUNK then
      redis.call('RPUSH', key, unpack(batch))
      batch = {}
    end
  end
  if #batch > 0 then
    redis.call('RPUSH', key, unpack(batch))
  end
end

local was_empty = redis.call('LLEN', queue_key) == 0
push_range(queue_key, first_envelope, first_envelope + released - 1, true)
if released < total then
  push_range(pending_key, first_envelope + released, #ARGV, false)
end

redis.call('SADD', types_key, task_type)
redis.call('HINCRBY', stats_key, 'enqueued', released)
count_queued(task_type, released)
for _ = 1, math.min(released, wake_cap) do
  redis.call('RPUSH', wake_key, '1')
end
redis.call('LTRIM', wake_key, -wake_cap, -1)
if was_empty then
  redis.call('PUBLISH', demand_channel, task_type)
end
return released
