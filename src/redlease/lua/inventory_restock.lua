-- inventory_restock.lua: add units to the stock (available and total).
--
-- KEYS[1..5] stock, orders, holds, userholds, users (see inventory_lib.lua)
-- ARGV[1] qty   units to add (integer >= 0)
-- Returns {"stock", available, reserved, sold, total} after the restock
local now = now_ms()
settle_oldest(now, SWEEP)
redis.call('HINCRBY', K.stock, 'available', ARGV[1])
redis.call('HINCRBY', K.stock, 'total', ARGV[1])
return stock_reply(now)
