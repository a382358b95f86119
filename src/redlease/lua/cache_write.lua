-- cache_write.lua: store a rebuilt value, unless a newer rebuild has begun or written since.
--
-- The fenced write of redlease.cached: a rebuild holds the key's rebuild lock and writes with
-- that lock's fence. A rebuild whose lease ran out while it computed (paused, slow) comes back
-- with an older fence than the lock's counter (someone took the lock after it) or than the
-- value's: it is refused, so it never overwrites a newer value.
-- KEYS[1] data   HASH    the cached value (see cache_read.lua)
-- KEYS[2] fence  STRING  the rebuild lock's fencing counter (raised by each acquisition,
--                        INCR'd by cache_invalidate.lua; armed by cache_arm.lua)
-- ARGV[1] fence     the writer's fencing token (integer >= 1)
-- ARGV[2] value     the serialized value
-- ARGV[3] ttl_ms    how long the value is fresh (> 0)
-- ARGV[4] stale_ms  how long it is then served stale while refreshed (>= 0)
-- ARGV[5] keep_ms   how long the fencing counter must live from now, at least (cache_arm.lua)
-- Returns {1, fence} when stored, {0, newest} when refused (nothing changed)
local fence = tonumber(ARGV[1])
local issued = tonumber(redis.call('GET', KEYS[2]) or '0')
local mark = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
-- the one safety-critical line: a fence older than the lock's or the value's never writes
if fence < issued or fence < mark then return {0, math.max(issued, mark)} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1], 'fresh', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl + tonumber(ARGV[4]))
-- the counter outlives the value: a rebuild that began before it expired is refused after
local keep = tonumber(ARGV[5])
if redis.call('PTTL', KEYS[2]) < keep then redis.call('PEXPIRE', KEYS[2], keep) end
return {1, fence}
