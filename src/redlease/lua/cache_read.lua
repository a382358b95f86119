-- cache_read.lua: one cached value and whether it is fresh, by the server's clock.
--
-- KEYS[1] data   HASH  value = the serialized value, fence = the fence of the rebuild that
--                      wrote it, fresh = server ms until which it is fresh; the key expires
--                      at fresh + the stale window
-- Returns {0} when there is no value (a miss), {1, value} when fresh, {2, value} when stale
-- (past fresh, still within the stale window: served while one caller refreshes it)
local found = redis.call('HMGET', KEYS[1], 'value', 'fresh')
if not found[1] then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(found[2] or '0') then return {1, found[1]} end
return {2, found[1]}
