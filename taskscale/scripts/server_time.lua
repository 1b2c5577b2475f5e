-- server_time: the Redis clock, for Python code that compares a time with
-- the ones the scripts store (taskscale/server_clock.py).  A script, not a
-- plain TIME: a cluster client sends TIME to any node and a cluster pipeline
-- takes neither TIME nor EVAL, while a script is routed by its key.
--
-- KEYS[1]  any key of the namespace (not read: it routes the call to the
--          node holding the namespace), e.g. {ns}:types
--
-- Returns {unix seconds, microseconds}, as TIME.
--
-- Errors: none

--! include lib/clock.lua
return clock
