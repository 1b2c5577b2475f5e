#!lua flags=no-writes
-- history_read: the history buckets FIRST..LAST of some types, in one
-- read-only call (taskscale/history.py derives the percentiles).
--
-- KEYS[1]  {ns}:types  set of task types (not read: routes the call)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  FIRST, the oldest bucket (unix seconds // 10)
-- ARGV[3]  LAST, the newest bucket
-- ARGV[4..]  the types T
--
-- Returns, per type, per bucket FIRST..LAST, the bucket hash's HGETALL
-- reply ({} when the bucket holds nothing).
--
-- Errors: `history_read: at most 8640 buckets per type`

local prefix, first, last = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if last - first + 1 > 8640 then
    return redis.error_reply('history_read: at most 8640 buckets per type')
end
local out = {}
for i = 4, #ARGV do
    local rows = {}
    for b = first, last do
        rows[#rows + 1] = redis.call('HGETALL', prefix .. 'history:' .. ARGV[i] .. ':' .. b)
    end
    out[#out + 1] = rows
end
return out
