-- cache_invalidate.lua: drop a cached value, and the right of a running rebuild to store.
--
-- KEYS[1] data   HASH    the cached value (see cache_read.lua)
-- KEYS[2] fence  STRING  the rebuild lock's fencing counter: INCR'd when it exists, so that a
--                        rebuild already running (computed from data older than this call)
--                        is refused by cache_write.lua; the lock's next fence is higher still
-- Returns 1 if a value was dropped, 0 if there was none
local dropped = redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('INCR', KEYS[2]) end
return dropped
