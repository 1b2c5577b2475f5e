-- workflow_cancel: end a running workflow as cancelled (or failed, when the
-- scheduler ends one whose step was lost): its waiting and held steps never
-- start, its queued steps are removed, its running steps are flagged
-- ({ns}:cancel:ID, what current_task().cancelled reads).  docs/schema.md,
-- "Workflows".
--
-- KEYS[1]  {ns}:workflows  zset W -> unix ms it started, while it runs
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  W, the workflow id
-- ARGV[3]  the state it ends in: "cancelled" or "failed"
-- ARGV[4]  the reason kept with it
--
-- Returns {"ended", state} when it was running, {"finished", its state} when
-- it had already ended, {"unknown", ""} when there is no such workflow.
--
-- Errors: `invalid state <state>`

local prefix, w = ARGV[1], ARGV[2]
--! include lib/clock.lua
--! include lib/workflow.lua

if ARGV[3] ~= 'cancelled' and ARGV[3] ~= 'failed' then
    return redis.error_reply('invalid state ' .. tostring(ARGV[3]))
end
local state = redis.call('HGET', prefix .. 'wf:' .. w, 'state')
if not state then
    return {'unknown', ''}
end
if wf_end(w, ARGV[3], ARGV[4] or '') == 1 then
    return {'ended', ARGV[3]}
end
return {'finished', state}
