-- redispy_acquire.lua: take a lock in redis-py's own layout (compat.Lock keys="redis-py"):
-- the key is the lock's name and its value the holder's token, exactly what redis-py's Lock
-- sets (SET name token NX PX), so the two exclude each other.
--
-- KEYS[1] name   STRING  holder's token (no other key: none is left behind)
-- ARGV[1] token  our token
-- ARGV[2] lease  lease in ms (integer > 0)
-- Returns {1, fence} acquired, fence = the server's time in us; {0, pttl} held by another,
-- pttl its lease left in ms (-1: no expiry, as a redis-py Lock with timeout=None sets)
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, now_us()}
end
return {0, redis.call('PTTL', KEYS[1])}
