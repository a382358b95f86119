-- inventory_confirm.lua: reserved -> sold (payment went through).
--
-- KEYS[1..5] stock, orders, holds, userholds, users (see inventory_lib.lua)
-- ARGV[1] order id
-- Returns {"order", ...}   sold now (changed = 1), or already sold (0)
--         {"closed", ...}  expired or cancelled: nothing is sold
--         {"missing"}      no such order
-- An order past its deadline is expired even if no script settled it yet: too late to sell.
return transition('confirm', ARGV[1])
