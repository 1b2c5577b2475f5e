-- schedule_add: create a periodic schedule, or replace its definition.
-- Any language can SCRIPT LOAD this file and EVALSHA it (docs/schema.md);
-- a scheduler materializes the first occurrence (schedule_advance) within
-- moments, woken by the token this script pushes.
--
-- KEYS[1]  {ns}:schedules   zset name -> due time of the next occurrence
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  N, the schedule name (1-100 characters of A-Z a-z 0-9 _ . -)
-- ARGV[3]  T, the task type
-- ARGV[4]  the task template: an envelope without "id" (a JSON object with
--          "type" = T; "args", "kwargs", "priority", "max_retries" as usual)
-- ARGV[5]  cron expression ("" when ARGV[6] is given); checked by the scheduler
-- ARGV[6]  interval in ms ("" when ARGV[5] is given): occurrences at the
--          multiples of it since the Unix epoch
-- ARGV[7]  time zone of the cron expression (IANA name; "" = UTC)
-- ARGV[8]  catch_up: "1" = after downtime run every missed occurrence,
--          "0" = run the missed ones once, together
--
-- An identical definition changes nothing (so an application may call this
-- at every start): returns {"unchanged", rev}.  A new one is stored with
-- next_ms 0 (no occurrence yet); a changed one first withdraws the pending
-- occurrence of the old definition.  A paused schedule stays paused.
-- Returns {"created" | "updated" | "unchanged", rev}.  Invalid input is an
-- error "ERR invalid schedule: reason" and nothing is written.
--
-- Errors: `invalid schedule: name must be 1-100 characters of A-Z a-z 0-9 _ . -`
--         `invalid schedule: task type must be 1-128 characters of A-Z a-z 0-9 _ . -`
--         `invalid schedule: the task template is not a JSON object`
--         `invalid schedule: the task template's "type" must be <T>`
--         `invalid schedule: "priority" must be an integer 0-9`
--         `invalid schedule: the task template may not carry "<id|reply_to|fanout|unique_key>"`
--         `invalid schedule: give exactly one of a cron expression and an interval`
--         `invalid schedule: the interval must be a whole number of ms > 0`
--         `invalid schedule: the cron expression or time zone is malformed`
--         `invalid schedule: a time zone applies to cron schedules only`
--         `invalid schedule: catch_up must be "0" or "1"`
--         (nothing is written)

local prefix, name, ttype, task = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local cron, every, tz, catch_up = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
--! include lib/clock.lua

--! include lib/schedule_unpend.lua

local function invalid(reason)
    return redis.error_reply('invalid schedule: ' .. reason)
end
local function valid_name(s, longest)
    return #s >= 1 and #s <= longest and string.match(s, '^[%w_%.%-]+$') ~= nil
end

if not valid_name(name, 100) then
    return invalid('name must be 1-100 characters of A-Z a-z 0-9 _ . -')
end
if not valid_name(ttype, 128) then
    return invalid('task type must be 1-128 characters of A-Z a-z 0-9 _ . -')
end
local ok, doc = pcall(cjson.decode, task)
if not ok or type(doc) ~= 'table' or string.sub(task, 1, 1) ~= '{' then
    return invalid('the task template is not a JSON object')
end
if doc.type ~= ttype then
    return invalid('the task template\'s "type" must be ' .. ttype)
end
local p = doc.priority
if p ~= nil and (type(p) ~= 'number' or p ~= math.floor(p) or p < 0 or p > 9) then
    return invalid('"priority" must be an integer 0-9')
end
for _, field in ipairs({'id', 'reply_to', 'fanout', 'unique_key'}) do
    if doc[field] ~= nil then
        return invalid('the task template may not carry "' .. field .. '"')
    end
end
if (cron == '') == (every == '') then
    return invalid('give exactly one of a cron expression and an interval')
end
if every ~= '' and (not string.match(every, '^[1-9]%d*$') or #every > 15) then
    return invalid('the interval must be a whole number of ms > 0')
end
if #cron > 200 or #tz > 64 or string.find(cron, '[^%w%s%*/,%-%?#]') then
    return invalid('the cron expression or time zone is malformed')
end
if tz ~= '' and every ~= '' then
    return invalid('a time zone applies to cron schedules only')
end
if catch_up ~= '0' and catch_up ~= '1' then
    return invalid('catch_up must be "0" or "1"')
end

local skey = prefix .. 'schedule:' .. name
local old = redis.call('HMGET', skey, 'type', 'task', 'cron', 'every_ms', 'tz', 'catch_up', 'rev', 'paused')
if old[1] == ttype and old[2] == task and old[3] == cron and old[4] == every
    and old[5] == tz and old[6] == catch_up then
    return {'unchanged', tonumber(old[7])}
end
local outcome = 'created'
if old[1] then
    outcome = 'updated'
    schedule_unpend(skey, name)
end
redis.call('HSET', skey, 'name', name, 'type', ttype, 'task', task, 'cron', cron,
    'every_ms', every, 'tz', tz, 'catch_up', catch_up, 'next_ms', '0', 'updated_ms', now)
redis.call('HDEL', skey, 'error')
redis.call('HSETNX', skey, 'created_ms', now)
redis.call('HSETNX', skey, 'occurrences', 0)
redis.call('HSETNX', skey, 'last_ms', 0)
redis.call('HSETNX', skey, 'paused', '0')
local rev = redis.call('HINCRBY', skey, 'rev', 1)
if old[8] == '1' then
    redis.call('ZADD', KEYS[1], '+inf', name)
else
    redis.call('ZADD', KEYS[1], 0, name)
    redis.call('RPUSH', prefix .. 'wake:scheduler', '1')
    redis.call('LTRIM', prefix .. 'wake:scheduler', -64, -1)
end
return {outcome, rev}
