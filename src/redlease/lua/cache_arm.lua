-- cache_arm.lua: before a rebuild takes its lock, make the lock's fencing counter expirable.
--
-- A cached value's rebuild lock is one per distinct key; a counter kept forever would leave a
-- key per argument tuple ever cached. So the counter expires `keep_ms` after it was last armed
-- or written, and starts again at the server's time in microseconds: above every fence the
-- expired counter issued (it counted up from an older time, by one per acquisition, far fewer
-- than the microseconds since), so a rebuild paused across the expiry is still refused.
-- The lock's own scripts keep the expiry (common_lib.lua's next_fence sets KEEPTTL): once armed
-- here, the counter expires whatever follows (a crowd granted the lock in turn, a rebuild
-- that raised, a process that died holding it).
-- KEYS[1] fence  STRING  the rebuild lock's fencing counter (raised by each acquisition)
-- ARGV[1] keep_ms  how long it must live from now at least (> the wait, the rebuild and the
--                  value's life: see cache.Options.keep_ms)
-- Returns 1 when the counter was started here, 0 when it existed (its expiry pushed back)
local keep = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  -- the time in microseconds, as an exact integer string (no float formatting)
  redis.call('SET', KEYS[1], t[1] .. string.format('%06d', tonumber(t[2])), 'PX', keep)
  return 1
end
local left = redis.call('PTTL', KEYS[1])
if left < keep then redis.call('PEXPIRE', KEYS[1], keep) end
return 0
