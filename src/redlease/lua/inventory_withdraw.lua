-- inventory_withdraw.lua: take units out of sale (available and total): damaged, lost, sold
-- elsewhere. The inverse of restock; held and sold units are never touched.
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] qty        units to take out (integer >= 1)
-- ARGV[2] retention  ms a settled order id is kept, then forgotten (integer >= 0; 0: forever)
-- Returns {"stock", available, reserved, sold, total} after the withdrawal
--         {"soldout", available, requested}  fewer than qty units available: nothing taken
-- All or nothing. Before refusing, expired holds are settled (at most as many as the units
-- missing), as reserve does, so a refusal never blames a hold that has already expired.
local qty = tonumber(ARGV[1])
RETAIN = tonumber(ARGV[2])
local now = now_ms()
sweep(now)
local available = tonumber(redis.call('HGET', K.stock, 'available') or '0')
while available < qty do
  local freed, seen = settle_oldest(now, qty - available)
  if seen == 0 then break end
  available = available + freed
end
if available < qty then return {'soldout', available, qty} end
-- available >= qty was read in this same script: neither count can go negative, and
-- reserved and sold keep every unit a buyer holds or bought.
redis.call('HINCRBY', K.stock, 'available', -qty)
redis.call('HINCRBY', K.stock, 'total', -qty)
return stock_reply(now)
