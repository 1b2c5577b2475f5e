-- How long the oldest ready task of a type has waited: the one definition,
-- shared by observe.lua (the controller's queue-wait target) and
-- console_overview.lua (the console's overview); inlined by the include
-- directive of luascripts.py.
--
-- A ready list is FIFO, so the oldest task of a priority level is the head of
-- its list, and a type's oldest ready task is the head that has waited
-- longest.  A task waits from its "due_ms" (a promoted delayed task waits from
-- its due time), else its "enqueued_ms", decoded as claim.lua decodes them
-- for the wait_ms counter (the last of duplicate stamps wins); a head that
-- does not decode, or carries neither stamp, is left out.
--
-- oldest_ready_ms(lists, now_ms): milliseconds (never below 0) the oldest
-- head of the ready lists `lists` has waited at now_ms (unix ms, Redis
-- clock); -1 when none of them has a readable head.
local function oldest_ready_ms(lists, now_ms)
    local oldest = -1
    for _, key in ipairs(lists) do
        local head = redis.call('LINDEX', key, 0)
        if head then
            local ok, doc = pcall(cjson.decode, head)
            if ok and type(doc) == 'table' then
                local since = tonumber(doc.due_ms) or tonumber(doc.enqueued_ms)
                if since then
                    oldest = math.max(oldest, now_ms - since, 0)
                end
            end
        end
    end
    return oldest
end
