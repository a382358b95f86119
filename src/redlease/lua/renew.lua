-- renew.lua: the watchdog's batch: extend every lock in KEYS that is still ours.
--
-- KEYS[i]       lock key of the i-th lease (STRING holder's token)
-- ARGV[2i - 1]  our token for KEYS[i]
-- ARGV[2i]      new remaining lease in ms for KEYS[i]
-- Returns an array: 1 where renewed, 0 where the lock is no longer ours (lost)
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
