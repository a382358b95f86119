-- once_inspect.lua: the last run, read atomically with the server's time.
--
-- KEYS[1] run  HASH  the last run (see once_lib.lua)
-- Returns {now, state, fence, start, end, until, every, host, pid, token} (nil where absent:
--         state nil when no run ever started), or {-3, 1} if KEYS[1] holds data redlease did
--         not write
local key = KEYS[1]
if not ours(key) then return {-3, 1} end
local run = redis.call('HMGET', key, 'state', 'fence', 'start', 'end', 'until', 'every', 'host',
  'pid', 'token')
local reply = {now_ms()}
for i = 1, 9 do reply[i + 1] = run[i] end
return reply
