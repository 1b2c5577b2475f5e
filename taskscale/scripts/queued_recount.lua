-- queued_recount: set {ns}:QUEUED[T] to the length of T's ready lists where
-- they differ, atomically, for every type in the types set or the hash.  The
-- scripts keep the count exact; this catches a producer that pushes to
-- q:T:P without it (a plain MULTI from another language, an old client), so
-- the controller sees those tasks within one recount.  Run by every
-- scheduler every lease / 2; any number may run at once (each call is exact).
--
-- KEYS[1]  {ns}:types    set of task types
-- KEYS[2]  {ns}:QUEUED   hash T -> tasks in q:T:0..9
--
-- ARGV[1]  key prefix "{ns}:"
--
-- Each fix adds 1 to stats "queued_repaired" of T.
--
-- Returns {types checked, types repaired, sum of |count - lengths| over the
-- repaired}.  A type whose ready list is not a list is left as it is (the
-- scripts that meet it report the key).
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`

local prefix = ARGV[1]
--! include lib/key_types.lua

local bad = wrong_key({KEYS[1], 'set', KEYS[2], 'hash'})
if bad then
    return bad
end
local counted = {}
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do
    counted[flat[i]] = tonumber(flat[i + 1]) or 0
end
local types = redis.call('SMEMBERS', KEYS[1])
for name in pairs(counted) do
    if redis.call('SISMEMBER', KEYS[1], name) == 0 then
        types[#types + 1] = name
    end
end

local repaired, drift = 0, 0
for _, ttype in ipairs(types) do
    local lists = {}
    for level = 0, 9 do
        lists[level + 1] = prefix .. 'q:' .. ttype .. ':' .. level
    end
    local length = 0
    if redis.call('EXISTS', unpack(lists)) > 0 then
        for _, key in ipairs(lists) do
            local n = redis.pcall('LLEN', key)
            if type(n) ~= 'number' then  -- not a list (issue 21): leave the type as it is
                length = nil
                break
            end
            length = length + n
        end
    end
    local have = counted[ttype] or 0
    if length ~= nil and have ~= length then
        redis.call('HSET', KEYS[2], ttype, length)
        redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'queued_repaired', 1)
        repaired = repaired + 1
        drift = drift + math.abs(have - length)
    end
end
return {#types, repaired, drift}
