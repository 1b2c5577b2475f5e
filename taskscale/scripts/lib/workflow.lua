-- Workflow transitions (taskscale.workflows; docs/schema.md, "Workflows"),
-- shared by complete.lua and fail.lua (a step's final outcome, in the same
-- atomic call that records it), workflow_submit.lua, workflow_cancel.lua and
-- workflow_sweep.lua (inlined by the include directive of luascripts.py).
-- The including script defines `prefix` ("{ns}:"); `now` comes
-- from lib/clock.lua.
--
-- A step is an ordinary task whose envelope carries "workflow" (W) and
-- "step" (S); its definition (wf:W:steps) holds its envelope as text cut
-- around the arguments ("pre", "own", "post"), so results are joined in as
-- JSON text, never decoded and encoded again.  Step states (wf:W:state):
-- waiting (parents unfinished), held (its group's limit is reached), ready
-- (its task is queued, delayed for a retry or running), succeeded, failed,
-- skipped (a parent failed under the "continue" policy), cancelled.
--
-- wf_step_final(env, outcome, reply): the hook of complete.lua / fail.lua.
--   A step's first final outcome ('succeeded' / 'failed') is recorded and
--   its dependants released or skipped; any later one is ignored (a step
--   may run twice, its dependants start once).
-- wf_ready(w, sid, def): release a step whose parents are done (or held).
-- wf_end(w, state, reason): end a running workflow: waiting and held steps
--   are cancelled, queued ones removed, running ones flagged for
--   cancellation (cancel:ID); returns 1 if it was running.
--! include lib/clock.lua
--! include lib/stamp.lua
--! include lib/wake_cap.lua
--! include lib/queued.lua

local WF_FLAG_TTL = 86400

-- steps that left "waiting"/"held" (the count the metrics show as waiting)
local function wf_unwait(n)
    redis.call('HINCRBY', prefix .. 'workflows:totals', 'steps_waiting', -n)
end

-- A step's definition, or nil (missing, or not JSON: a transition inside
-- complete / fail must never raise, or the worker's outcomes would not be
-- recorded).
local function wf_def(w, sid)
    local raw = redis.call('HGET', prefix .. 'wf:' .. w .. ':steps', sid)
    if not raw then
        return nil
    end
    local ok, d = pcall(cjson.decode, raw)
    if not ok or type(d) ~= 'table' then
        return nil
    end
    return d
end

-- the result of a success reply {"id":...,"ok":true,"result":BODY}, as text
local function wf_result_body(reply)
    local _, e = string.find(reply or '', ',"ok":true,"result":', 1, true)
    if not e then
        return 'null'
    end
    return string.sub(reply, e + 1, #reply - 1)
end

local function wf_push(w, sid, d)
    local wf_state_k = prefix .. 'wf:' .. w .. ':state'
    local wf_res_k = prefix .. 'wf:' .. w .. ':results'
    local parents = d.parents or {}
    local inject = ''
    if d.cb then
        local ok_n, bad_n = 0, 0
        for _, p in ipairs(parents) do
            if redis.call('HGET', wf_state_k, p) == 'succeeded' then
                ok_n = ok_n + 1
            else
                bad_n = bad_n + 1
            end
        end
        inject = '{"total":' .. #parents .. ',"succeeded":' .. ok_n .. ',"failed":' .. bad_n .. '}'
    elseif #parents == 1 then
        inject = redis.call('HGET', wf_res_k, parents[1]) or 'null'
    elseif #parents > 1 then
        local parts = redis.call('HMGET', wf_res_k, unpack(parents))
        for i = 1, #parents do
            if not parts[i] then
                parts[i] = 'null'
            end
        end
        inject = '[' .. table.concat(parts, ',') .. ']'
    end
    local args = inject
    if d.own ~= '' then
        if args ~= '' then
            args = args .. ','
        end
        args = args .. d.own
    end
    local env = stamp_json(d.pre .. args .. d.post, 'enqueued_ms', string.format('%d', now))
    local ttype = d.type
    local qkey = prefix .. 'q:' .. ttype .. ':' .. d.priority
    redis.call('SADD', prefix .. 'types', ttype)
    if redis.call('RPUSH', qkey, env) == 1 then
        redis.call('PUBLISH', prefix .. 'demand', ttype)
    end
    count_queued(ttype, 1)
    redis.call('HINCRBY', prefix .. 'stats:' .. ttype, 'enqueued', 1)
    redis.call('RPUSH', prefix .. 'wake:' .. ttype, '1')
    redis.call('LTRIM', prefix .. 'wake:' .. ttype, -WAKE_CAP, -1)
    redis.call('HSET', wf_state_k, sid, 'ready', sid .. '|ready_ms', string.format('%d', now),
        sid .. '|env', env)
    wf_unwait(1)
end

local function wf_ready(w, sid, d)
    if d.gate then
        local wf_k = prefix .. 'wf:' .. w
        local limit = tonumber(redis.call('HGET', wf_k, 'gate|' .. d.gate .. '|limit')) or 0
        local running = tonumber(redis.call('HGET', wf_k, 'gate|' .. d.gate .. '|running')) or 0
        if limit > 0 and running >= limit then
            redis.call('RPUSH', prefix .. 'wf:' .. w .. ':held:' .. d.gate, sid)
            redis.call('HSET', prefix .. 'wf:' .. w .. ':state', sid, 'held')
            return
        end
        redis.call('HINCRBY', wf_k, 'gate|' .. d.gate .. '|running', 1)
    end
    wf_push(w, sid, d)
end

-- a step of gate g reached its final outcome: its slot goes to the next held step
local function wf_gate_free(w, g)
    local nxt = redis.call('LPOP', prefix .. 'wf:' .. w .. ':held:' .. g)
    local nd = nxt and wf_def(w, nxt)
    if nd then
        wf_push(w, nxt, nd)
    else
        redis.call('HINCRBY', prefix .. 'wf:' .. w, 'gate|' .. g .. '|running', -1)
    end
end

local function wf_close(w, state, reason)
    local wf_k = prefix .. 'wf:' .. w
    local ttl = tonumber(redis.call('HGET', wf_k, 'ttl')) or 86400
    redis.call('HSET', wf_k, 'state', state, 'reason', reason, 'finished_ms', string.format('%d', now))
    redis.call('ZREM', prefix .. 'workflows', w)
    redis.call('HINCRBY', prefix .. 'workflows:totals', state, 1)
    local notice = cjson.encode({id = w, state = state, reason = reason})
    redis.call('RPUSH', wf_k .. ':done', notice)
    for _, k in ipairs({wf_k, wf_k .. ':steps', wf_k .. ':state', wf_k .. ':results', wf_k .. ':done'}) do
        redis.call('EXPIRE', k, ttl)
    end
end

local function wf_end(w, state, reason)
    local wf_k = prefix .. 'wf:' .. w
    if redis.call('HGET', wf_k, 'state') ~= 'running' then
        return 0
    end
    local wf_state_k = wf_k .. ':state'
    local gates = {}
    local defs = redis.call('HGETALL', wf_k .. ':steps')
    for i = 1, #defs, 2 do
        local sid = defs[i]
        local d = wf_def(w, sid) or {type = '', priority = 5, task = ''}
        local st = redis.call('HGET', wf_state_k, sid)
        if d.gate then
            gates[d.gate] = true
        end
        if st == 'waiting' or st == 'held' then
            redis.call('HSET', wf_state_k, sid, 'cancelled', sid .. '|done_ms', string.format('%d', now))
            wf_unwait(1)
        elseif st == 'ready' then
            local env = redis.call('HGET', wf_state_k, sid .. '|env')
            local qkey = prefix .. 'q:' .. d.type .. ':' .. d.priority
            if env and redis.call('LREM', qkey, 1, env) == 1 then
                count_queued(d.type, -1)
                redis.call('HSET', wf_state_k, sid, 'cancelled', sid .. '|done_ms', string.format('%d', now))
                redis.call('HINCRBY', prefix .. 'stats:' .. d.type, 'cancelled', 1)
            else  -- running (or delayed for a retry): its function sees the flag
                redis.call('SET', prefix .. 'cancel:' .. d.task, '1', 'EX', WF_FLAG_TTL)
            end
        end
    end
    for g in pairs(gates) do
        redis.call('DEL', prefix .. 'wf:' .. w .. ':held:' .. g)
    end
    wf_close(w, state, reason)
    return 1
end

local function wf_parent_done(w, c)
    local wf_state_k = prefix .. 'wf:' .. w .. ':state'
    local left = redis.call('HINCRBY', wf_state_k, c .. '|left', -1)
    local cd = left <= 0 and redis.call('HGET', wf_state_k, c) == 'waiting' and wf_def(w, c)
    if cd then
        wf_ready(w, c, cd)
    end
end

-- under "continue": the dependants of a failed (or skipped) step are skipped,
-- a batch callback only counts the parent as failed
local function wf_skip_children(w, sid, d)
    local wf_k = prefix .. 'wf:' .. w
    for _, c in ipairs(d.children or {}) do
        local cd = wf_def(w, c) or {}
        if cd.cb then
            wf_parent_done(w, c)
        elseif redis.call('HGET', wf_k .. ':state', c) == 'waiting' then
            redis.call('HSET', wf_k .. ':state', c, 'skipped', c .. '|done_ms', string.format('%d', now))
            redis.call('HSET', wf_k .. ':results', c, cjson.encode({ok = false, error_type = 'Skipped',
                error = 'step ' .. sid .. ' did not succeed'}))
            redis.call('HINCRBY', wf_k, 'finished', 1)
            wf_unwait(1)
            wf_skip_children(w, c, cd)
        end
    end
end

local function wf_check_done(w)
    local wf_k = prefix .. 'wf:' .. w
    local m = redis.call('HMGET', wf_k, 'finished', 'total', 'sinks', 'first_failure')
    local ok, sinks = pcall(cjson.decode, m[3] or '')
    if (tonumber(m[1]) or 0) < (tonumber(m[2]) or 1) or not ok or type(sinks) ~= 'table' then
        return
    end
    for _, s in ipairs(sinks) do
        if redis.call('HGET', wf_k .. ':state', s) ~= 'succeeded' then
            wf_close(w, 'failed', m[4] or ('step ' .. s .. ' did not succeed'))
            return
        end
    end
    wf_close(w, 'succeeded', '')
end

local function wf_step_final(env, outcome, reply)
    if not string.find(env, '"workflow":"', 1, true) then
        return
    end
    local ok, doc = pcall(cjson.decode, env)
    if not ok or type(doc) ~= 'table' or type(doc.workflow) ~= 'string' or type(doc.step) ~= 'string' then
        return
    end
    local w, sid = doc.workflow, doc.step
    local wf_k = prefix .. 'wf:' .. w
    if redis.call('HGET', wf_k .. ':state', sid) ~= 'ready' then
        return  -- unknown, expired, or already final: its dependants started once
    end
    local d = wf_def(w, sid) or {type = '?'}
    redis.call('HSET', wf_k .. ':state', sid, outcome, sid .. '|done_ms', string.format('%d', now))
    if outcome == 'succeeded' then
        redis.call('HSET', wf_k .. ':results', sid, wf_result_body(reply))
    else
        if not reply or reply == '' then
            reply = '{"ok":false,"error_type":"Failed","error":"the step failed"}'
        end
        redis.call('HSET', wf_k .. ':results', sid, reply)
    end
    if redis.call('HGET', wf_k, 'state') ~= 'running' then
        return  -- ended meanwhile (cancelled, failed): recorded, nothing released
    end
    if d.gate then
        wf_gate_free(w, d.gate)
    end
    redis.call('HINCRBY', wf_k, 'finished', 1)
    if outcome == 'failed' then
        redis.call('HINCRBY', wf_k, 'failed', 1)
        local why = 'step ' .. sid .. ' (' .. d.type .. ') failed'
        local rok, rdoc = pcall(cjson.decode, reply)
        if rok and type(rdoc) == 'table' and type(rdoc.error) == 'string' then
            why = why .. ': ' .. tostring(rdoc.error_type or 'Error') .. ': ' .. rdoc.error
        end
        redis.call('HSETNX', wf_k, 'first_failure', why)
        if redis.call('HGET', wf_k, 'policy') ~= 'continue' then
            wf_end(w, 'failed', why)
            return
        end
        wf_skip_children(w, sid, d)
    else
        for _, c in ipairs(d.children or {}) do
            wf_parent_done(w, c)
        end
    end
    wf_check_done(w)
end
