-- heartbeat: renew worker W's lease and rewrite its registry record.  The
-- record expires with the lease, so a dead worker's numbers vanish by
-- themselves; the reaper uses the lease in {ns}:workers to return its tasks.
--
-- KEYS[1]  {ns}:workers    zset W -> lease expiry (unix ms)
-- KEYS[2]  {ns}:worker:W   registry record hash
--
-- ARGV[1]  W
-- ARGV[2]  lease in ms
-- ARGV[3..] field, value pairs of the record (docs/schema.md)
--
-- Returns now (unix ms, Redis clock).  Sets "heartbeat_ms" to now and
-- "started_ms" on the first heartbeat of a record.  A key of the wrong type
-- is the error "BADKEY <key> ..." and nothing is written (lib/key_types.lua).
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local worker, lease = ARGV[1], tonumber(ARGV[2])
--! include lib/clock.lua
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'zset', KEYS[2], 'hash'})
if bad then
    return bad
end

redis.call('ZADD', KEYS[1], now + lease, worker)
redis.call('HSETNX', KEYS[2], 'started_ms', now)
local fields = {'heartbeat_ms', now}
for i = 3, #ARGV do
    fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('PEXPIRE', KEYS[2], lease)
return now
