#!lua flags=no-writes
-- history_read: the history buckets FIRST..LAST of some types, in one
-- read-only call (taskscale/history.py derives the percentiles).
--
-- KEYS[1]  {ns}:types  set of task types (not read: routes the call)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  FIRST, the oldest bucket (unix seconds // 10)
-- ARGV[3]  LAST, the newest bucket
-- ARGV[4]  "all" (every field) or "counts" (completed, failed, dead only:
--          the console overview's rates, read for every type)
-- ARGV[5..]  the types T
--
-- Returns, per type: with "all", per bucket FIRST..LAST, the bucket hash's
-- HGETALL reply ({} when the bucket holds nothing); with "counts", one flat
-- list c, f, d of bucket FIRST, then of the next, ... (0 when absent).
--
-- Errors: `history_read: at most 8640 buckets per type`

local prefix, first, last = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local counts = ARGV[4] == 'counts'
if last - first + 1 > 8640 then
    return redis.error_reply('history_read: at most 8640 buckets per type')
end
local out = {}
for i = 5, #ARGV do
    local rows = {}
    for b = first, last do
        local hkey = prefix .. 'history:' .. ARGV[i] .. ':' .. b
        if counts then
            local got = redis.call('HMGET', hkey, 'c', 'f', 'd')
            for j = 1, 3 do
                rows[#rows + 1] = tonumber(got[j]) or 0
            end
        else
            rows[#rows + 1] = redis.call('HGETALL', hkey)
        end
    end
    out[#out + 1] = rows
end
return out
