-- inventory_restock.lua: add units to the stock (available and total).
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] qty        units to add (integer >= 0)
-- ARGV[2] retention  ms a settled order id is kept, then forgotten (integer >= 0; 0: forever)
-- Returns {"stock", available, reserved, sold, total} after the restock
--         {"full", total, qty}  the total would pass 2^53 - 1, above which Lua's numbers (doubles)
--                               no longer count every unit: nothing was changed
RETAIN = tonumber(ARGV[2])
local total = tonumber(redis.call('HGET', K.stock, 'total') or '0')
-- Exact below 2^53; a sum above it rounds to at least 2^53, so the refusal is exact too.
if total + tonumber(ARGV[1]) > 9007199254740991 then return {'full', total, tonumber(ARGV[1])} end
local now = now_ms()
sweep(now)
redis.call('HINCRBY', K.stock, 'available', ARGV[1])
redis.call('HINCRBY', K.stock, 'total', ARGV[1])
return stock_reply(now)
