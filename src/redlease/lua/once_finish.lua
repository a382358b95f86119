-- once_finish.lua: the run succeeded: the name stays taken until its start + every.
--
-- KEYS[1] run    HASH  the last run (see once_lib.lua)
-- ARGV[1] token  the run's token
-- Returns {1, now}  recorded (state done, end now, until start + every)
--         {0, now}  not this run's to record: its lease ran out (or another run started)
--         now = the server's time in ms
local key = KEYS[1]
local now = now_ms()
if not ours(key) or not running(key, ARGV[1], now) then return {0, now} end
local start = tonumber(redis.call('HGET', key, 'start'))
local every = tonumber(redis.call('HGET', key, 'every'))
redis.call('HSET', key, 'state', 'done', 'end', now, 'until', start + every)
return {1, now}
