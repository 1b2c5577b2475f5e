-- The completion of a fan-out, shared by fanout_final (lib/fanout_final.lua:
-- the last outcome of a closed fan-out) and fanout_close.lua (closed after
-- its last outcome).  `now` comes from lib/clock.lua.
--
-- fanout_done(fkey, F, total, succeeded, failed, ttl, result_ttl): stamp
-- finished_ms, push the notice {"id","total","succeeded","failed"} to
-- fanout:F:done and publish it on the channel of the same name, and let the
-- state expire after `ttl` seconds and the collected results after
-- `result_ttl`.
--! include lib/clock.lua

local function fanout_done(fkey, f, total, ok, bad, ttl, result_ttl)
    redis.call('HSET', fkey, 'finished_ms', string.format('%d', now))
    local notice = '{"id":' .. cjson.encode(f) .. ',"total":' .. total
        .. ',"succeeded":' .. ok .. ',"failed":' .. bad .. '}'
    redis.call('RPUSH', fkey .. ':done', notice)
    redis.call('PUBLISH', fkey .. ':done', notice)
    redis.call('EXPIRE', fkey, ttl)
    redis.call('EXPIRE', fkey .. ':done', ttl)
    redis.call('EXPIRE', fkey .. ':pending', ttl)
    redis.call('EXPIRE', fkey .. ':results', result_ttl)
end
