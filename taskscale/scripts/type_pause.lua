-- type_pause: pause or resume task type T (taskscale.pause_type /
-- resume_type, `taskscale types pause|resume T`, the console's buttons).
-- A paused type stays queued: claim.lua claims none of it (a task already
-- running finishes), the controller does not scale up for it.
--
-- KEYS[1]  {ns}:paused  hash T -> unix ms (Redis clock) T was paused since
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  T
-- ARGV[3]  "pause" or "resume"
--
-- Pausing a paused type keeps its first time.  Resuming pushes a wake token
-- on wake:T, so idle workers claim its waiting tasks at once.
-- Returns 1 if the call changed T's state (paused it, or resumed a paused
-- type), else 0.
--
-- Errors: `BADKEY <key> is a <found>, not a <wanted>`; `mode must be pause or resume`

local prefix, ttype, mode = ARGV[1], ARGV[2], ARGV[3]
--! include lib/clock.lua
--! include lib/key_types.lua
--! include lib/wake_cap.lua
if mode ~= 'pause' and mode ~= 'resume' then
    return redis.error_reply('mode must be pause or resume')
end
local wkey = prefix .. 'wake:' .. ttype
local bad = wrong_key({KEYS[1], 'hash', wkey, 'list'})
if bad then
    return bad
end
if mode == 'pause' then
    return redis.call('HSETNX', KEYS[1], ttype, now)
end
local was = redis.call('HDEL', KEYS[1], ttype)
redis.call('RPUSH', wkey, '1')
redis.call('LTRIM', wkey, -WAKE_CAP, -1)
return was
