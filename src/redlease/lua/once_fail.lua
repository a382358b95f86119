-- once_fail.lua: the run failed: the name is free at once, so another host may retry.
--
-- KEYS[1] run    HASH  the last run (see once_lib.lua)
-- ARGV[1] token  the run's token
-- Returns {1, now}  recorded (state failed, end now, until now)
--         {0, now}  not this run's to record: its lease ran out (or another run started)
--         now = the server's time in ms
local key = KEYS[1]
local now = now_ms()
if not ours(key) or not running(key, ARGV[1], now) then return {0, now} end
redis.call('HSET', key, 'state', 'failed', 'end', now, 'until', now)
return {1, now}
