-- WAKE_CAP: the most tokens a wake list keeps ({ns}:wake:T, and
-- {ns}:wake:scheduler).  Every push onto one is followed by
-- LTRIM key -WAKE_CAP -1: a token only says "look again", so a list no one
-- pops stays this small.  The one definition in Lua (inlined by the include
-- directive of luascripts.py), equal to keys.WAKE_TOKENS_CAP, which the
-- Python callers pass to fanout_submit and fanout_add
-- (tests/scripts/test_wake_cap.py).
local WAKE_CAP = 64
