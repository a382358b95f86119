-- inventory_restock.lua: add units to the stock (available and total).
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] qty        units to add (integer >= 0)
-- ARGV[2] retention  ms a settled order id is kept, then forgotten (integer >= 0; 0: forever)
-- Returns {"stock", available, reserved, sold, total} after the restock
RETAIN = tonumber(ARGV[2])
local now = now_ms()
sweep(now)
redis.call('HINCRBY', K.stock, 'available', ARGV[1])
redis.call('HINCRBY', K.stock, 'total', ARGV[1])
return stock_reply(now)
