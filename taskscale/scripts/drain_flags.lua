-- drain_flags: set and clear the drain flags of pods (issue 23).  The
-- controller calls it on every pass of a scaler with the scaler's pods on a
-- node that is cordoned or tainted for removal (flag), and those it knows are
-- not (clear: on a node back in service, or gone); claim.lua gives a worker
-- whose pod has a flag nothing (taskscale/controller/drain_flags.py writes).
--
-- KEYS[1]  {ns}:draining   hash pod -> unix ms (Redis clock) its drain was first seen
--
-- ARGV[1]  n, how many pods to flag
-- ARGV[2..n+1]  the pods to flag (a flag already set keeps its time)
-- ARGV[n+2..]   the pods to clear
--
-- Returns {k, pod1, ..., podk, P1, ms1, P2, ms2, ...}: the k pods flagged by
-- this call (they were not before), then every flag after it, as HGETALL.
-- A KEYS[1] of another type is the error "BADKEY <key> ..." and nothing is
-- written (lib/key_types.lua).
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local n = tonumber(ARGV[1]) or 0
--! include lib/clock.lua
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'hash'})
if bad then
    return bad
end

local out = {0}
for i = 2, n + 1 do
    if redis.call('HSETNX', KEYS[1], ARGV[i], now) == 1 then
        out[#out + 1] = ARGV[i]
    end
end
out[1] = #out - 1
if #ARGV >= n + 2 then
    redis.call('HDEL', KEYS[1], unpack(ARGV, n + 2))
end
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do
    out[#out + 1] = v
end
return out
