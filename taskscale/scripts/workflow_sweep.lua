-- workflow_sweep: find running workflows whose steps were lost and end them
-- as failed, with a reason (the scheduler calls it; docs/schema.md,
-- "Workflows").  A ready step's task is always somewhere -- a ready list,
-- the delayed set (a retry), a worker's in-flight hash (a dead worker's too,
-- until the reaper returns it) -- since every move of a task is one script;
-- it is lost only when something removed it outside the workflow (an
-- operator's purge, a cancel of the step's task id, an envelope the claim
-- script dead-lettered).  Only steps ready for longer than the bound are
-- looked for.  A running workflow with no step ready or held cannot move on
-- (its keys were damaged from outside) and is ended too.
--
-- KEYS[1]  {ns}:workflows  zset W -> unix ms it started, while it runs
-- KEYS[2]  {ns}:workers    zset of workers (their in-flight hashes are searched)
--
-- ARGV[1]  key prefix "{ns}:"
-- ARGV[2]  ms a step must have been ready before it may count as lost
-- ARGV[3]  the most workflows looked at in this call (oldest first)
-- ARGV[4]  the most ready-list and delayed-set entries read per search
--
-- Returns {checked, ended, W1, reason1, W2, reason2, ...}.
--
-- Errors: none

local prefix = ARGV[1]
local bound, most, depth = tonumber(ARGV[2]) or 60000, tonumber(ARGV[3]) or 100, tonumber(ARGV[4]) or 100000
--! include lib/clock.lua
--! include lib/workflow.lua

local workers = redis.call('ZRANGE', KEYS[2], 0, -1)

local function in_list(key, needle)
    local size = math.min(redis.call('LLEN', key), depth)
    for start = 0, size - 1, 1000 do
        for _, env in ipairs(redis.call('LRANGE', key, start, math.min(start + 999, size - 1))) do
            if string.find(env, needle, 1, true) then
                return true
            end
        end
    end
    return false
end

local function somewhere(d, env)
    local task = d.task
    for _, worker in ipairs(workers) do
        if redis.call('HEXISTS', prefix .. 'inflight:' .. worker, task) == 1 then
            return true
        end
    end
    local qkey = prefix .. 'q:' .. d.type .. ':' .. d.priority
    if env and redis.call('LPOS', qkey, env) then
        return true
    end
    local needle = '"' .. task .. '"'  -- (an id written with or without spaces)
    for level = 0, 9 do
        if in_list(prefix .. 'q:' .. d.type .. ':' .. level, needle) then
            return true
        end
    end
    local dkey = prefix .. 'delayed:' .. d.type
    local size = math.min(redis.call('ZCARD', dkey), depth)
    for start = 0, size - 1, 1000 do
        for _, e in ipairs(redis.call('ZRANGE', dkey, start, math.min(start + 999, size - 1))) do
            if string.find(e, needle, 1, true) then
                return true
            end
        end
    end
    return false
end

local out = {0, 0}
for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - bound, 'LIMIT', 0, most)) do
    out[1] = out[1] + 1
    local wf_k = prefix .. 'wf:' .. w
    if redis.call('HGET', wf_k, 'state') ~= 'running' then
        redis.call('ZREM', KEYS[1], w)  -- its keys are gone (or it ended): nothing to watch
    else
        local st = redis.call('HGETALL', wf_k .. ':state')
        local lost, live = nil, 0
        for i = 1, #st, 2 do
            if (st[i + 1] == 'ready' or st[i + 1] == 'held') and not string.find(st[i], '|', 1, true) then
                live = live + 1
            end
            if st[i + 1] == 'ready' and not string.find(st[i], '|', 1, true) then
                local sid = st[i]
                local since = tonumber(redis.call('HGET', wf_k .. ':state', sid .. '|ready_ms')) or 0
                if now - since >= bound then
                    local d = wf_def(w, sid)
                    if not somewhere(d, redis.call('HGET', wf_k .. ':state', sid .. '|env')) then
                        lost = 'step ' .. sid .. ' (' .. d.type .. ') was lost: its task ' .. d.task
                            .. ' is in no ready list, delayed set or worker'
                        break
                    end
                end
            end
        end
        if not lost and live == 0 then  -- nothing can move it on (its data was damaged)
            lost = 'no step is ready or running, and the workflow has not finished'
        end
        if lost then
            wf_end(w, 'failed', lost)
            out[2] = out[2] + 1
            out[#out + 1] = w
            out[#out + 1] = lost
        end
    end
end
return out
