-- inventory_order.lua: one order as it stands now; never writes.
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] order id
-- Returns {"order", ...} (a reserved order past its deadline is shown expired) or {"missing"}
local now = now_ms()
local o = read_order(ARGV[1])
if not o then return {'missing'} end
if o.state == 'reserved' and o.deadline <= now then o.state = 'expired' end
return order_reply('order', o, now, 0)
