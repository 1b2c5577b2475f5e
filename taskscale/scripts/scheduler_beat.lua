-- scheduler_beat: record that scheduler S is alive, or that it stopped.
-- Schedulers need no lock (promote and reap are atomic), so this is only
-- for people and alerts: `taskscale status` warns when delayed tasks are
-- overdue and no scheduler is alive.
--
-- KEYS[1]  {ns}:schedulers   zset S -> lease expiry (unix ms, Redis clock)
--
-- ARGV[1]  S (the scheduler id)
-- ARGV[2]  lease in ms; 0 = S is stopping (removed)
--
-- Expired members are dropped on every call.  KEYS[1] of the wrong type is
-- the error "BADKEY <key> ..." (lib/key_types.lua).
--
-- Returns the number of live schedulers after the call.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local id, lease = ARGV[1], tonumber(ARGV[2])
--! include lib/clock.lua
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'zset'})
if bad then
    return bad
end

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if lease > 0 then
    redis.call('ZADD', KEYS[1], now + lease, id)
else
    redis.call('ZREM', KEYS[1], id)
end
return redis.call('ZCARD', KEYS[1])
