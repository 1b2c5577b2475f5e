-- scaler_report: record one reconcile pass of scaler S, for the dashboard's
-- scaling page (taskscale/controller/decision_log.py writes, taskscale/
-- scaling.py reads; docs/schema.md, "Scaling decisions").
--
-- KEYS[1]  {ns}:scalers        zset S -> unix ms of its last pass
-- KEYS[2]  {ns}:scaler:S       string: JSON of the last pass
-- KEYS[3]  {ns}:decisions:S    list of JSON decisions, newest first
--
-- ARGV[1]  S
-- ARGV[2]  JSON of the last pass
-- ARGV[3]  JSON of a decision to append, or "" (nothing changed since the last one)
-- ARGV[4]  most decisions kept (LTRIM)
-- ARGV[5]  ms a scaler that stopped reporting stays listed (and its keys live)
--
-- Scalers whose last pass is older than ARGV[5] are dropped from KEYS[1]
-- (their keys expire by themselves).
-- Returns now (unix ms, Redis clock).
--
-- Errors: none

local scaler, keep = ARGV[1], tonumber(ARGV[5])
--! include lib/clock.lua

redis.call('ZADD', KEYS[1], now, scaler)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - keep)
redis.call('SET', KEYS[2], ARGV[2], 'PX', keep)
if ARGV[3] ~= '' then
    redis.call('LPUSH', KEYS[3], ARGV[3])
    redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[4]) - 1)
end
redis.call('PEXPIRE', KEYS[3], keep)
return now
