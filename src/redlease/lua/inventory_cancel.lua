-- inventory_cancel.lua: reserved -> cancelled; the units return to available.
--
-- KEYS[1..5] stock, orders, holds, userholds, users (see inventory_lib.lua)
-- ARGV[1] order id
-- Returns {"order", ...}   cancelled now (changed = 1), or already cancelled or expired (0)
--         {"closed", ...}  sold: cancel never puts sold units back on sale
--         {"missing"}      no such order
return transition('cancel', ARGV[1])
