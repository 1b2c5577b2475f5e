-- admin_purge: delete up to n ready tasks of type T (most urgent level
-- first), and with "delayed" also up to n of its delayed tasks.  Bounded per
-- call so a purge of a million tasks never blocks Redis for long; the caller
-- repeats until it returns 0.  Each call is atomic and keeps counters right.
--
-- KEYS[1]  {ns}:types   set of task types (names the slot)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  T
-- ARGV[3]  n, the most tasks to delete in this call
-- ARGV[4]  "ready" or "delayed" (ready lists and the delayed set)
--
-- stats "purged" + the number deleted.  A fan-out sub-task is counted as
-- failed for its fan-out and its slot passes to the next pending sub-task
-- (released to the ready list, where a later call may purge it too), so a
-- purged fan-out still finishes; a unique task releases its key.  ACTIVE_TASKS is never touched: running
-- tasks are not in these lists.
--
-- Returns the number of tasks deleted by this call.
--
-- Errors: none

local prefix, ttype = ARGV[1], ARGV[2]
local n = tonumber(ARGV[3]) or 1000
--! include lib/clock.lua
--! include lib/wake_cap.lua

--! include lib/fanout_final.lua
--! include lib/unique_release.lua
--! include lib/queued.lua

local removed = {}
for level = 0, 9 do
    if #removed >= n then
        break
    end
    local got = redis.call('LPOP', prefix .. 'q:' .. ttype .. ':' .. level, n - #removed)
    if got then
        for _, env in ipairs(got) do
            removed[#removed + 1] = env
        end
    end
end
count_queued(ttype, -#removed)
if ARGV[4] == 'delayed' and #removed < n then
    local got = redis.call('ZPOPMIN', prefix .. 'delayed:' .. ttype, n - #removed)
    for i = 1, #got, 2 do
        removed[#removed + 1] = got[i]
    end
end
for _, env in ipairs(removed) do
    unique_release(env)
    if string.find(env, '"fanout"', 1, true) then
        local ok, doc = pcall(cjson.decode, env)
        if ok and type(doc) == 'table' and type(doc.fanout) == 'string' and doc.fanout ~= '' then
            fanout_final(doc.fanout, 'failed', env, nil)
        end
    end
end
if #removed > 0 then
    redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'purged', #removed)
end
return #removed
