-- Flow-control limits of a type, from the {ns}:limits hash (field T -> JSON
-- {"rate": N, "period_ms": P, "burst": B, "concurrency": K}; absent or 0 =
-- no limit).  limits_of returns nil for an unlimited type or a field that
-- does not decode, so a bad value never stops a queue.
--! include lib/wake_cap.lua
local function limits_of(spec)
    if not spec then
        return nil
    end
    local ok, lim = pcall(cjson.decode, spec)
    if not ok or type(lim) ~= 'table' then
        return nil
    end
    local rate, period = tonumber(lim.rate) or 0, tonumber(lim.period_ms) or 0
    local out = {concurrency = math.floor(tonumber(lim.concurrency) or 0)}
    if rate > 0 and period > 0 then
        out.per_ms = rate / period
        out.burst = math.max(1, math.floor(tonumber(lim.burst) or 1))
    end
    if out.per_ms == nil and out.concurrency <= 0 then
        return nil
    end
    return out
end

-- A finished task of a type with a concurrency cap frees a slot fleet-wide:
-- push one wake token when tasks of the type are waiting, so an idle worker
-- (not only the one that finished it) claims the next.  Needs `prefix` in
-- scope; limits_key nil (a caller of the older form) = no-op.
local function cap_wake(limits_key, ttype)
    if not limits_key then
        return
    end
    local lim = limits_of(redis.call('HGET', limits_key, ttype))
    if not lim or lim.concurrency <= 0 then
        return
    end
    local qkeys = {}
    for level = 0, 9 do
        qkeys[level + 1] = prefix .. 'q:' .. ttype .. ':' .. level
    end
    if redis.call('EXISTS', unpack(qkeys)) > 0 then
        local wkey = prefix .. 'wake:' .. ttype
        redis.call('RPUSH', wkey, '1')
        redis.call('LTRIM', wkey, -WAKE_CAP, -1)
    end
end
