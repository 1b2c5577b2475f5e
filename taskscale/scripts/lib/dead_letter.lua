-- Dead-letter append under the cap, shared by fail.lua (retries exhausted)
-- and claim.lua (an envelope it cannot take); inlined by the include
-- directive of luascripts.py.  The including script defines `prefix` ("{ns}:").
--
-- dead_push(ttype, record, cap): RPUSH the JSON `record` to dead:T; when
-- cap > 0 and dead:T now holds more than cap records, LTRIM the oldest and
-- add their number to stats:T "dead_dropped".  cap 0 (or not a number) = no
-- cap.  The caller counts stats "dead" itself.
local function dead_push(ttype, record, cap)
    local dkey = prefix .. 'dead:' .. ttype
    local kept = redis.call('RPUSH', dkey, record)
    local most = tonumber(cap) or 0
    if most > 0 and kept > most then
        redis.call('LTRIM', dkey, kept - most, -1)
        redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'dead_dropped', kept - most)
    end
end
