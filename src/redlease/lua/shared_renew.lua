-- shared_renew.lua: the watchdog's batch: extend every holder lease in KEYS that is still ours.
--
-- KEYS[i]       holders ZSET of the i-th lease (token -> lease end, server ms)
-- ARGV[2i - 1]  our token in KEYS[i]
-- ARGV[2i]      new remaining lease in ms
-- Returns an array: 1 where renewed, 0 where the lease ran out or was released (lost)
local now = now_ms()
local renewed = {}
for i, key in ipairs(KEYS) do
  local score = redis.call('ZSCORE', key, ARGV[2 * i - 1])
  if score and tonumber(score) > now then
    local lease = tonumber(ARGV[2 * i])
    redis.call('ZADD', key, 'XX', now + lease, ARGV[2 * i - 1])
    if redis.call('PTTL', key) < 3 * lease then redis.call('PEXPIRE', key, 3 * lease) end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
