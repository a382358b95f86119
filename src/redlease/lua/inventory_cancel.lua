-- inventory_cancel.lua: reserved -> cancelled; the units return to available.
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] order id   the order
-- ARGV[2] retention  ms a settled order id is kept, then forgotten (integer >= 0; 0: forever)
-- Returns {"order", ...}   cancelled now (changed = 1), or already cancelled or expired (0)
--         {"closed", ...}  sold: cancel never puts sold units back on sale
--         {"missing"}      no such order
RETAIN = tonumber(ARGV[2])
return transition('cancel', ARGV[1])
