-- inventory_snapshot.lua: the counts, read atomically; never writes.
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- Returns {"stock", available, reserved, sold, total}: holds past their deadline count as
-- available although no script has settled them yet (the work grows with their number).
return stock_reply(now_ms())
