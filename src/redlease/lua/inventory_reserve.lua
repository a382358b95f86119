-- inventory_reserve.lua: hold `qty` units for order `id` of `user`, in one round trip.
--
-- KEYS[1..6] stock, orders, holds, userholds, users, settled (see inventory_lib.lua)
-- ARGV[1] order id   names one purchase (forever, or until forgotten: ARGV[6])
-- ARGV[2] user       who buys
-- ARGV[3] qty        units (integer >= 1)
-- ARGV[4] hold       ms the units stay held for payment (integer >= 1)
-- ARGV[5] limit      the user's limit in units of live holds and sold orders; 0: none
-- ARGV[6] retention  ms a settled order id is kept, then forgotten (integer >= 0; 0: forever)
-- Returns now                the server's time (integer, ms): a new reservation, held until
--                            now + ARGV[4] (the caller knows the rest: a short reply is cheap)
--         {"order", ...}     the known order (a retry; changed = 0)
--         {"conflict", ...}  the id belongs to another purchase (other user or qty)
--         {"limit", limit, already, requested}
--         {"soldout", available, requested}
-- Checks in this order: known order id, user limit, stock. Nothing is taken on a refusal.
local id, user, qty = ARGV[1], ARGV[2], tonumber(ARGV[3])
local hold_ms, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
RETAIN = tonumber(ARGV[6])
local now = now_ms()
sweep(now)

-- 1. A known order id is the same purchase again (a retry): answer it, never take more,
--    whatever its state, also after it was cancelled or expired.
local o = read_order(id)
if o then
  settle(id, o, now)
  if o.user ~= user or o.qty ~= qty then return order_reply('conflict', o, now, 0) end
  return order_reply('order', o, now, 0)
end

-- 2. The user's limit. Before refusing, settle the user's own expired holds (at most as many
--    as the units missing: each frees one unit or more), so that no expired hold counts.
if limit > 0 then
  local already = tonumber(redis.call('HGET', K.users, user) or '0')
  while already + qty > limit do
    local freed, seen = settle_user(user, now, already + qty - limit)
    if seen == 0 then break end
    already = already - freed
  end
  if already + qty > limit then return {'limit', limit, already, qty} end
end

-- 3. The stock, likewise: settle expired holds (at most as many as the units missing)
--    before answering sold out. Settling moves units from reserved to available, so both
--    counts stay exact without reading them again.
local counts = redis.call('HMGET', K.stock, 'available', 'reserved')
local available, reserved = tonumber(counts[1] or '0'), tonumber(counts[2] or '0')
while available < qty do
  local freed, seen = settle_oldest(now, qty - available)
  if seen == 0 then break end
  available, reserved = available + freed, reserved - freed
end
if available < qty then return {'soldout', available, qty} end

-- The one safety-critical step: available >= qty was read in this same script, so the
-- count cannot go negative and no unit is held twice.
hold(id, user, qty, now + hold_ms, available, reserved)
return now
