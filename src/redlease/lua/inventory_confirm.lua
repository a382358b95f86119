-- inventory_confirm.lua: reserved -> sold (payment went through).
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] order id   the order
-- ARGV[2] retention  ms a settled order id is kept, then forgotten (integer >= 0; 0: forever)
-- Returns {"order", ...}   sold now (changed = 1), or already sold (0)
--         {"closed", ...}  expired or cancelled: nothing is sold
--         {"missing"}      no such order
-- An order past its deadline is expired even if no script settled it yet: too late to sell.
RETAIN = tonumber(ARGV[2])
return transition('confirm', ARGV[1])
