-- fanout_open: open a streamed fan-out F of task type T (docs/schema.md,
-- "Streamed fan-out").  Sub-tasks are added later by fanout_add, in any
-- number of calls, while earlier ones already run; the completion notice
-- waits for fanout_close and the last outcome.
--
-- KEYS[1]  {NS}:fanout:F           hash: fan-out state (must not exist)
-- KEYS[2]  {NS}:fanouts:open       zset F -> unix ms its open state expires
--          (optional: the index `taskscale status` counts open streams by;
--          members past their time are pruned here)
-- ARGV[1]  F, the fan-out id
-- ARGV[2]  T, the task type
-- ARGV[3]  P, the priority (0-9)
-- ARGV[4]  limit C (>= 1): most sub-tasks released at once
-- ARGV[5]  ttl: seconds the state is kept once done -- and, while open, after
--          its last add or outcome (an abandoned stream expires)
-- ARGV[6]  collect: most bytes of results kept (0 = results not collected)
-- ARGV[7]  result_ttl: seconds the collected results are kept once done
--
-- Returns 1, or an error reply "FANOUT_EXISTS" when F is already in use.
--
-- Errors: `FANOUT_EXISTS fan-out id <F> is already in use`

local fkey, f = KEYS[1], ARGV[1]
if redis.call('EXISTS', fkey) == 1 then
  return redis.error_reply('FANOUT_EXISTS fan-out id ' .. f .. ' is already in use')
end
--! include lib/clock.lua
local now_ms = string.format('%d', now)
redis.call('HSET', fkey,
  'type', ARGV[2], 'priority', ARGV[3], 'total', 0, 'limit', ARGV[4],
  'running', 0, 'succeeded', 0, 'failed', 0, 'created_ms', now_ms, 'ttl', ARGV[5],
  'open', 1, 'collect_max_bytes', ARGV[6], 'collected_bytes', 0, 'results_dropped', 0,
  'result_ttl', ARGV[7])
redis.call('EXPIRE', fkey, tonumber(ARGV[5]))
if KEYS[2] then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now_ms)
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]) * 1000, f)
end
return 1
