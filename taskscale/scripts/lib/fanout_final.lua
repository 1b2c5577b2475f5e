-- Fan-out accounting, shared by complete.lua, fail.lua, cancel.lua and the
-- admin scripts (inlined by the include directive of luascripts.py where
-- those scripts name this file).  The including script defines `prefix`
-- ("{ns}:") and WAKE_CAP before the include line; `now` comes from
-- lib/clock.lua (a script that reads the clock earlier includes it first).
--
-- fanout_final(F, outcome, env, result, unreleased): a sub-task of fan-out F
-- reached its final outcome ('succeeded' or 'failed').  Count it; if F collects results,
-- store `result` (the reply JSON; nil = removed before it ran) under the
-- sub-task's "fanout_seq" in fanout:F:results, or a "dropped" marker once
-- the results are over F's size limit; hand its slot to the next pending
-- sub-task (stamped and pushed to its ready list) or release the slot --
-- unless `unreleased` (a sub-task cancelled while still pending held no
-- slot); when
-- every sub-task is done and F is closed (a streamed fan-out is open until
-- fanout_close), push and publish the completion notice once and let the
-- fan-out's keys expire.  While F is open, its expiry in {ns}:fanouts:open
-- (the index of open streams) moves on with its keys' TTL.
--! include lib/clock.lua
--! include lib/stamp.lua
--! include lib/fanout_done.lua
--! include lib/wake_cap.lua
--! include lib/queued.lua

local function fanout_final(f, outcome, env, result, unreleased)
    local fkey = prefix .. 'fanout:' .. f
    if redis.call('EXISTS', fkey) == 0 then
        return
    end
    redis.call('HINCRBY', fkey, outcome, 1)
    local st = redis.call('HMGET', fkey, 'type', 'priority', 'total', 'succeeded', 'failed', 'ttl',
        'open', 'collect_max_bytes', 'result_ttl')
    local ttl = tonumber(st[6]) or 86400
    local collect_max = tonumber(st[8]) or 0
    local seq = env and string.match(env, '"fanout_seq":(%d+)')
    if collect_max > 0 and seq then
        local body = result
        if not body or body == '' then
            body = '{"ok":false,"error_type":"Removed","error":"the sub-task was removed before it ran"}'
        end
        local used = tonumber(redis.call('HGET', fkey, 'collected_bytes')) or 0
        if used + #body > collect_max then
            body = '{"ok":' .. (outcome == 'succeeded' and 'true' or 'false') .. ',"dropped":true}'
            redis.call('HINCRBY', fkey, 'results_dropped', 1)
        else
            redis.call('HINCRBY', fkey, 'collected_bytes', #body)
        end
        redis.call('HSET', fkey .. ':results', seq, body)
    end
    local nxt = nil
    if not unreleased then  -- (a pending sub-task held no slot: nothing to pass on)
        nxt = redis.call('LPOP', fkey .. ':pending')
        if not nxt then
            redis.call('HINCRBY', fkey, 'running', -1)
        end
    end
    if nxt then
        local qkey = prefix .. 'q:' .. st[1] .. ':' .. (st[2] or '5')
        count_queued(st[1], 1)
        local stamped = stamp_first(nxt, 'enqueued_ms', string.format('%d', now))
        if redis.call('RPUSH', qkey, stamped) == 1 then
            redis.call('PUBLISH', prefix .. 'demand', st[1])
        end
        redis.call('HINCRBY', prefix .. 'stats:' .. st[1], 'enqueued', 1)
        redis.call('RPUSH', prefix .. 'wake:' .. st[1], '1')
        redis.call('LTRIM', prefix .. 'wake:' .. st[1], -WAKE_CAP, -1)
    end
    if st[7] == '1' then
        -- open: an abandoned stream's keys expire `ttl` after its last activity
        for _, k in ipairs({fkey, fkey .. ':pending', fkey .. ':results'}) do
            redis.call('EXPIRE', k, ttl)
        end
        redis.call('ZADD', prefix .. 'fanouts:open', 'XX', now + ttl * 1000, f)
        return
    end
    local total, ok, bad = tonumber(st[3]) or 0, tonumber(st[4]) or 0, tonumber(st[5]) or 0
    if ok + bad == total then
        fanout_done(fkey, f, total, ok, bad, ttl, tonumber(st[9]) or ttl)
    end
end
