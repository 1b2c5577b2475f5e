-- workflow_submit: store a workflow's steps and release the steps that have
-- no parents, atomically (taskscale.workflows.submit; docs/schema.md,
-- "Workflows").  Any language may call it with step definitions of the form
-- below.
--
-- KEYS[1]  {ns}:workflows  zset W -> unix ms it started, while it runs
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  W, the workflow id (1-64 characters of A-Z a-z 0-9 _ . -)
-- ARGV[3]  the failure policy: "stop" (the first failed step fails the
--          workflow) or "continue" (its dependants are skipped, the rest run)
-- ARGV[4]  seconds the workflow's keys are kept once it has finished
-- ARGV[5]  the sinks: JSON array of the step ids whose results are the
--          workflow's result
-- ARGV[6]  the gates: JSON object gate -> the most of its steps ready at once
-- ARGV[7]  a name shown with the workflow ("" = none)
-- ARGV[8..] pairs: step id S, its definition (JSON object: "type", "task"
--          (the task id), "priority" 0-9, "pre", "own", "post" (the envelope's
--          text before, between and after its arguments), "parents" (array of
--          step ids, each listed before this step), optional "gate", "cb" (a
--          batch callback), "label"; step ids are 1-32 characters of
--          A-Z a-z 0-9 _ . - (the children are derived from the parents)
--
-- Returns the number of steps released now.
--
-- Errors: `workflow <W> exists`,
-- `invalid workflow: the id must be 1-64 characters of A-Z a-z 0-9 _ . -`,
-- `invalid workflow: the policy must be "stop" or "continue"`,
-- `invalid workflow: sinks and gates must be JSON`,
-- `invalid workflow: step id <S> is malformed or repeated`,
-- `invalid workflow: step <S> has no valid definition`,
-- `invalid workflow: no steps`,
-- `invalid workflow: step <S> waits on <P>, which is not a step listed before it`

local prefix, w = ARGV[1], ARGV[2]
--! include lib/clock.lua
--! include lib/workflow.lua

if not string.match(w, '^[%w_%.%-]+$') or #w > 64 then
    return redis.error_reply('invalid workflow: the id must be 1-64 characters of A-Z a-z 0-9 _ . -')
end
if ARGV[3] ~= 'stop' and ARGV[3] ~= 'continue' then
    return redis.error_reply('invalid workflow: the policy must be "stop" or "continue"')
end
local wf_k = prefix .. 'wf:' .. w
if redis.call('EXISTS', wf_k) == 1 then
    return redis.error_reply('workflow ' .. w .. ' exists')
end
local ok_s, sinks = pcall(cjson.decode, ARGV[5])
local ok_g, gates = pcall(cjson.decode, ARGV[6])
if not ok_s or type(sinks) ~= 'table' or not ok_g or type(gates) ~= 'table' then
    return redis.error_reply('invalid workflow: sinks and gates must be JSON')
end
local steps, order = {}, {}
for i = 8, #ARGV, 2 do
    local sid = ARGV[i]
    if not string.match(sid, '^[%w_%.%-]+$') or #sid > 32 or steps[sid] then
        return redis.error_reply('invalid workflow: step id ' .. tostring(sid) .. ' is malformed or repeated')
    end
    local ok, d = pcall(cjson.decode, ARGV[i + 1] or '')
    if not ok or type(d) ~= 'table' or type(d.type) ~= 'string' or type(d.pre) ~= 'string'
        or type(d.own) ~= 'string' or type(d.post) ~= 'string' or type(d.task) ~= 'string'
        or type(d.priority) ~= 'number' then
        return redis.error_reply('invalid workflow: step ' .. tostring(sid) .. ' has no valid definition')
    end
    steps[sid] = d
    order[#order + 1] = sid
end
if #order == 0 then
    return redis.error_reply('invalid workflow: no steps')
end
-- parents come before their children (so there is no cycle); the children
-- lists are derived here from the parents, never taken from the caller
local seen = {}
for _, sid in ipairs(order) do
    steps[sid].children = {}
end
for _, sid in ipairs(order) do
    for _, p in ipairs(steps[sid].parents or {}) do
        if not seen[p] then
            return redis.error_reply('invalid workflow: step ' .. sid .. ' waits on ' .. tostring(p)
                .. ', which is not a step listed before it')
        end
        table.insert(steps[p].children, sid)
    end
    seen[sid] = true
end

local meta = {'state', 'running', 'policy', ARGV[3], 'total', #order, 'finished', 0, 'failed', 0,
    'created_ms', string.format('%d', now), 'ttl', tonumber(ARGV[4]) or 86400, 'sinks', ARGV[5],
    'name', ARGV[7]}
for g, limit in pairs(gates) do
    meta[#meta + 1] = 'gate|' .. g .. '|limit'
    meta[#meta + 1] = limit
    meta[#meta + 1] = 'gate|' .. g .. '|running'
    meta[#meta + 1] = 0
end
redis.call('HSET', wf_k, unpack(meta))
redis.call('ZADD', prefix .. 'workflows', now, w)
redis.call('HINCRBY', prefix .. 'workflows:totals', 'started', 1)
redis.call('HINCRBY', prefix .. 'workflows:totals', 'steps_waiting', #order)
for _, sid in ipairs(order) do
    local d = steps[sid]
    if #d.children == 0 then
        d.children = nil  -- (cjson would write an empty table as {})
    end
    redis.call('HSET', wf_k .. ':steps', sid, cjson.encode(d))
    redis.call('HSET', wf_k .. ':state', sid, 'waiting', sid .. '|left', #(steps[sid].parents or {}),
        sid .. '|task', steps[sid].task)
end
local released = 0
for _, sid in ipairs(order) do
    if #(steps[sid].parents or {}) == 0 then
        wf_ready(w, sid, steps[sid])
        released = released + 1
    end
end
return released
