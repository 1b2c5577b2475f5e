-- fanout_close: close a streamed fan-out F: no more sub-tasks may be added.
-- If every sub-task added has already finished, F is done now (notice pushed
-- and published, keys expire); else the last outcome finishes it
-- (lib/fanout_final.lua).  Closing twice is harmless.  A closed fan-out's
-- keys no longer expire while it runs (its sub-tasks are live tasks), only
-- once it is done.
--
-- KEYS[1]  {NS}:fanout:F           hash: fan-out state
-- KEYS[2]  {NS}:fanout:F:pending   list: sub-tasks not yet released
-- KEYS[3]  {NS}:fanout:F:results   hash: collected results
-- KEYS[4]  {NS}:fanout:F:done      list: completion notice
-- KEYS[5]  {NS}:fanouts:open       zset: open streams (optional; F is removed)
-- ARGV[1]  F, the fan-out id
--
-- Returns 1 if F is done (now or before), 0 if sub-tasks are still to
-- finish, or an error reply "FANOUT_UNKNOWN".
--
-- Errors: `FANOUT_UNKNOWN no such fan-out (never opened, or expired)`

local fkey, f = KEYS[1], ARGV[1]
--! include lib/clock.lua

--! include lib/fanout_done.lua

local st = redis.call('HMGET', fkey, 'total', 'succeeded', 'failed', 'ttl', 'open', 'result_ttl')
if not st[1] then
  return redis.error_reply('FANOUT_UNKNOWN no such fan-out (never opened, or expired)')
end
local total, ok, bad = tonumber(st[1]), tonumber(st[2]) or 0, tonumber(st[3]) or 0
if st[5] ~= '1' then
  return (ok + bad == total) and 1 or 0
end
redis.call('HSET', fkey, 'open', 0)
if KEYS[5] then
  redis.call('ZREM', KEYS[5], f)
end
if ok + bad == total then
  local ttl = tonumber(st[4]) or 86400
  fanout_done(fkey, f, total, ok, bad, ttl, tonumber(st[6]) or ttl)
  return 1
end
redis.call('PERSIST', fkey)
redis.call('PERSIST', KEYS[2])
redis.call('PERSIST', KEYS[3])
return 0
