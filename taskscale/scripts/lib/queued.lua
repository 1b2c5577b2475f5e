-- The per-type ready count {ns}:QUEUED (hash T -> tasks in q:T:0..9): every
-- script that pushes to or removes from a ready list moves it by the same
-- number in the same call, so the controller reads one HMGET instead of ten
-- LLENs per type (docs/schema.md, "The ready count").  The including script
-- defines `prefix` ("{ns}:").  A producer that pushes without it is caught
-- up by the scheduler's recount (queued_recount.lua).
--
-- count_queued(ttype, n): QUEUED[ttype] += n (n < 0 for tasks taken out).
local function count_queued(ttype, n)
    if n ~= 0 then
        redis.call('HINCRBY', prefix .. 'QUEUED', ttype, n)
    end
end
