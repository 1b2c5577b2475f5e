-- Fan-out accounting, shared by complete.lua and fail.lua (inlined by the
-- include directive of luascripts.py where those scripts name this file).
-- The including script defines `prefix` ("{ns}:"), `now` (unix ms from TIME)
-- and WAKE_CAP before the include line.
--
-- fanout_final(F, outcome): a sub-task of fan-out F reached its final outcome
-- ('succeeded' or 'failed'). Count it; hand its slot to the next pending
-- sub-task (stamped and pushed to its ready list) or release the slot; when
-- every sub-task is done, push and publish the completion notice once and
-- let the fan-out's keys expire.
local function fanout_final(f, outcome)
    local fkey = prefix .. 'fanout:' .. f
    if redis.call('EXISTS', fkey) == 0 then
        return
    end
    redis.call('HINCRBY', fkey, outcome, 1)
    local st = redis.call('HMGET', fkey, 'type', 'priority', 'total', 'succeeded', 'failed', 'ttl')
    local nxt = redis.call('LPOP', fkey .. ':pending')
    if nxt then
        local qkey = prefix .. 'q:' .. st[1] .. ':' .. (st[2] or '5')
        local env = '{"enqueued_ms":' .. string.format('%d', now) .. ',' .. string.sub(nxt, 2)
        if redis.call('RPUSH', qkey, env) == 1 then
            redis.call('PUBLISH', prefix .. 'demand', st[1])
        end
        redis.call('HINCRBY', prefix .. 'stats:' .. st[1], 'enqueued', 1)
        redis.call('RPUSH', prefix .. 'wake:' .. st[1], '1')
        redis.call('LTRIM', prefix .. 'wake:' .. st[1], -WAKE_CAP, -1)
    else
        redis.call('HINCRBY', fkey, 'running', -1)
    end
    local total, ok, bad = tonumber(st[3]) or 0, tonumber(st[4]) or 0, tonumber(st[5]) or 0
    if ok + bad == total then
        local ttl = tonumber(st[6]) or 86400
        redis.call('HSET', fkey, 'finished_ms', now)
        local notice = '{"id":' .. cjson.encode(f) .. ',"total":' .. total
            .. ',"succeeded":' .. ok .. ',"failed":' .. bad .. '}'
        redis.call('RPUSH', fkey .. ':done', notice)
        redis.call('PUBLISH', fkey .. ':done', notice)
        redis.call('EXPIRE', fkey, ttl)
        redis.call('EXPIRE', fkey .. ':done', ttl)
        redis.call('EXPIRE', fkey .. ':pending', ttl)
    end
end
