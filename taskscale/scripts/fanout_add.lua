-- fanout_add: add sub-tasks to an open streamed fan-out F, atomically
-- (docs/schema.md, "Streamed fan-out").  Each gets the next position
-- "fanout_seq" (0, 1, 2... across every add, in submission order); while
-- fewer than `limit` are released the new ones go to the ready list, the
-- rest wait in fanout:F:pending for a slot (passed on by fanout_final).
--
-- KEYS[1]  {NS}:fanout:F           hash: fan-out state (open)
-- KEYS[2]  {NS}:fanout:F:pending   list: sub-task envelopes not yet released
-- KEYS[3]  {NS}:q:T:P              list: the ready list of F's type and priority
-- KEYS[4]  {NS}:types              set: every task type ever enqueued
-- KEYS[5]  {NS}:stats:T            hash: counters of T (enqueued)
-- KEYS[6]  {NS}:wake:T             list: wake-up tokens of T
-- KEYS[7]  {NS}:fanout:F:results   hash: collected results (TTL refreshed)
-- KEYS[8]  {NS}:fanouts:open       zset: open streams (optional; F's expiry refreshed)
-- ARGV[1]  key prefix "{NS}:"
-- ARGV[2]  wake token cap
-- ARGV[3..] sub-task envelopes: JSON objects with "fanout": F, without
--          "enqueued_ms" or "fanout_seq" (this script stamps them)
--
-- Returns {released now, position of the first added}, or an error reply:
-- "FANOUT_UNKNOWN" (never opened, or expired), "FANOUT_CLOSED", or
-- "FANOUT_MISMATCH" (KEYS[3] is not F's ready list).
--
-- Errors: `FANOUT_UNKNOWN no such fan-out (never opened, or expired)`
--         `FANOUT_CLOSED the fan-out is closed: no more sub-tasks`
--         `FANOUT_MISMATCH <KEYS[3]> is not the fan-out's ready list`

local fkey, pending_key, queue_key = KEYS[1], KEYS[2], KEYS[3]
local types_key, stats_key, wake_key = KEYS[4], KEYS[5], KEYS[6]
local prefix, wake_cap = ARGV[1], tonumber(ARGV[2])

local st = redis.call('HMGET', fkey, 'type', 'priority', 'total', 'limit', 'running', 'open',
  'ttl', 'collect_max_bytes')
if not st[1] then
  return redis.error_reply('FANOUT_UNKNOWN no such fan-out (never opened, or expired)')
end
if st[6] ~= '1' then
  return redis.error_reply('FANOUT_CLOSED the fan-out is closed: no more sub-tasks')
end
if queue_key ~= prefix .. 'q:' .. st[1] .. ':' .. st[2] then
  return redis.error_reply('FANOUT_MISMATCH ' .. queue_key .. ' is not the fan-out\'s ready list')
end

--! include lib/clock.lua
local now_ms = string.format('%d', now)
--! include lib/stamp.lua
--! include lib/queued.lua
local total, limit, running = tonumber(st[3]), tonumber(st[4]), tonumber(st[5])
local collect = (tonumber(st[8]) or 0) > 0
local first = total
local was_empty = redis.call('LLEN', queue_key) == 0
local released = 0
local ready, later = {}, {}
local CHUNK = 500
local function flush(key, batch)
  if #batch > 0 then
    redis.call('RPUSH', key, unpack(batch))
  end
  return {}
end
for i = 3, #ARGV do
  local env = ARGV[i]
  if collect then
    env = stamp_first(env, 'fanout_collect', 'true')
  end
  env = stamp_first(env, 'fanout_seq', string.format('%d', total))
  total = total + 1
  if running < limit then
    running = running + 1
    released = released + 1
    ready[#ready + 1] = stamp_first(env, 'enqueued_ms', now_ms)
    if #ready == CHUNK then ready = flush(queue_key, ready) end
  else
    later[#later + 1] = env
    if #later == CHUNK then later = flush(pending_key, later) end
  end
end
flush(queue_key, ready)
flush(pending_key, later)
redis.call('HSET', fkey, 'total', total, 'running', running)
local ttl = tonumber(st[7]) or 86400
-- open: every key of F expires `ttl` after its last activity (EXPIRE of a
-- missing key is a no-op)
redis.call('EXPIRE', fkey, ttl)
redis.call('EXPIRE', pending_key, ttl)
redis.call('EXPIRE', KEYS[7], ttl)
if KEYS[8] then
  local f = string.sub(fkey, #(prefix .. 'fanout:') + 1)
  redis.call('ZADD', KEYS[8], 'XX', now + ttl * 1000, f)
end
if released > 0 then
  redis.call('SADD', types_key, st[1])
  redis.call('HINCRBY', stats_key, 'enqueued', released)
  count_queued(st[1], released)
  for _ = 1, math.min(released, wake_cap) do
    redis.call('RPUSH', wake_key, '1')
  end
  redis.call('LTRIM', wake_key, -wake_cap, -1)
  if was_empty then
    redis.call('PUBLISH', prefix .. 'demand', st[1])
  end
end
return {released, first}
