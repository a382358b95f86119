-- once_renew.lua: the watchdog's batch: extend every run in KEYS that is still in progress.
--
-- KEYS[i]       run HASH of the i-th run (see once_lib.lua)
-- ARGV[2i - 1]  the run's token
-- ARGV[2i]      new remaining lease in ms
-- Returns an array: 1 where renewed, 0 where the run is over or its lease ran out (lost)
local now = now_ms()
local renewed = {}
for i, key in ipairs(KEYS) do
  if ours(key) and running(key, ARGV[2 * i - 1], now) then
    redis.call('HSET', key, 'until', now + tonumber(ARGV[2 * i]))
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
