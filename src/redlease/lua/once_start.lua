-- once_start.lua: start a run unless one is in progress or one succeeded within its period.
--
-- KEYS[1] run    HASH    the last run (see once_lib.lua)
-- KEYS[2] fence  STRING  the fencing counter (never expires, never reset)
-- ARGV[1] token  this run's random token (>= 128 bits)
-- ARGV[2] lease  ms: the run's lease, renewed by the watchdog (integer > 0)
-- ARGV[3] every  ms: the period; a run that succeeds keeps the name until start + every
-- ARGV[4] host   who runs it (shown by inspect)
-- ARGV[5] pid    its process id
-- Returns {1, fence, now}  started; fence = this run's fencing token (strictly increasing,
--                          at least the server's time in us: common_lib.lua's next_fence)
--         {0, ms, now}     a run is in progress; ms = its lease left
--         {2, ms, now}     a run succeeded less than its period ago; ms until the name is free
--         {-3, i}          KEYS[i] holds data redlease did not write
--         now = the server's time in ms
local key, counter = KEYS[1], KEYS[2]
if not ours(key) then return {-3, 1} end
if not ours(counter, 'string') then return {-3, 2} end
local now = now_ms()
local last = redis.call('HMGET', key, 'state', 'until')
local free_at = tonumber(last[2] or '0')
if free_at > now then
  if last[1] == 'running' then return {0, free_at - now, now} end
  if last[1] == 'done' then return {2, free_at - now, now} end
end
local fence = next_fence(counter)
redis.call('HDEL', key, 'end')
redis.call('HSET', key, 'state', 'running', 'token', ARGV[1], 'fence', string.format('%d', fence),
  'start', now, 'until', now + tonumber(ARGV[2]), 'every', ARGV[3], 'host', ARGV[4],
  'pid', ARGV[5])
return {1, fence, now}
