-- limits_set: set or clear the flow-control limits of type T
-- (taskscale.set_limits / clear_limits, `taskscale limits set|clear`).
--
-- KEYS[1]  {ns}:limits  hash T -> JSON {"rate", "period_ms", "burst", "concurrency"}
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  T
-- ARGV[3]  the JSON limits, or "" to clear them
--
-- Either way the bucket {ns}:bucket:T is deleted (a new rate starts with a
-- full bucket) and a wake token is pushed on wake:T, so workers that wait for
-- a token or a slot claim again at once under the new limits.
-- Returns 1 if T had limits before, else 0.
--
-- Errors: `limits of <T> are not a JSON object`

local prefix, ttype, spec = ARGV[1], ARGV[2], ARGV[3]
local existed = redis.call('HEXISTS', KEYS[1], ttype)
if spec == '' then
    redis.call('HDEL', KEYS[1], ttype)
else
    local ok, doc = pcall(cjson.decode, spec)
    if not ok or type(doc) ~= 'table' then
        return redis.error_reply('limits of ' .. ttype .. ' are not a JSON object')
    end
    redis.call('HSET', KEYS[1], ttype, spec)
end
redis.call('DEL', prefix .. 'bucket:' .. ttype)
local wkey = prefix .. 'wake:' .. ttype
redis.call('RPUSH', wkey, '1')
redis.call('LTRIM', wkey, -64, -1)
return existed
