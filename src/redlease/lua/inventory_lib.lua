-- inventory_lib.lua: stock, orders and holds of one inventory, after common_lib.lua (now_ms).
-- Provides: K, TRANSITIONS, RETAIN, read_order, hold, close, settle, settle_user, sweep,
-- stock_reply, order_reply, transition, ... Loaded by: _core/inventory.py (every inventory_*
-- script: reserve, confirm, cancel, restock, withdraw, snapshot, order).
--
-- KEYS are the same six in every inventory script; all share the hash tag {name}, so they
-- live in one Redis Cluster slot:
--   KEYS[1] stock      HASH  available, reserved, sold, total (units)
--   KEYS[2] orders     HASH  order id -> "<state>|<qty>|<deadline ms>|<user>"; deleted only
--                            once settled and past the retention (below)
--   KEYS[3] holds      ZSET  order id -> hold deadline (server ms), for each reserved order
--   KEYS[4] userholds  ZSET  "<#user>:<user><deadline, %015d><order id>", score 0, for each
--                            reserved order: one user's holds in deadline order (ZRANGEBYLEX;
--                            the byte length before ':' keeps one user's range from another's)
--   KEYS[5] users      HASH  user -> units in the user's reserved and sold orders (> 0)
--   KEYS[6] settled    ZSET  order id -> when to forget it (server ms), for each order settled
--                            (sold, cancelled, expired) by a script called with a retention
-- After every script: available + reserved + sold == total, none negative; reserved is the
-- sum of qty over reserved orders and sold over sold ones.
--
-- A hold is live while now < deadline, where now is the server's TIME in ms (never a
-- client's clock). A reserved order past its deadline is expired for every reader at once;
-- settling it (close(..., 'expired')) returns its units to available. Writing scripts settle
-- at most SWEEP expired holds per call, oldest first.
--
-- Retention: a writing script called with a retention RETAIN > 0 (ms; 0: keep order ids
-- forever) records every order it settles in `settled`, to forget RETAIN ms later, and
-- forgets at most SWEEP orders whose time came, oldest first (sweep()). Until then the id
-- answers retries as before; after it, the id is unknown and may name a new purchase.
--
-- Replies about one order: {status, state, qty, deadline ms, now ms, user, changed (1/0)},
-- status "order" (here it is), "closed" (the transition is refused in this state) or
-- "conflict" (reserve: the id belongs to another purchase). Other replies: {"missing"},
-- {"soldout", available, requested}, {"limit", limit, already, requested} and
-- {"stock", available, reserved, sold, total} (expired holds counted as available), and
-- reserve's new reservation: now alone, an integer (the caller knows the rest).

local K = {stock = KEYS[1], orders = KEYS[2], holds = KEYS[3], userholds = KEYS[4],
           users = KEYS[5], settled = KEYS[6]}
local SWEEP = 100
local RETAIN = 0  -- ms a settled order id is kept (0: forever); writing scripts set it

-- What confirm and cancel do in each state (the same table as TRANSITIONS in Python):
-- a new state, 'same' (a no-op returning the order) or 'closed' (refused).
local TRANSITIONS = {
  confirm = {reserved = 'sold', sold = 'same', cancelled = 'closed', expired = 'closed'},
  cancel = {reserved = 'cancelled', cancelled = 'same', expired = 'same', sold = 'closed'},
}

local function int(n)  -- an integer as digits (tostring would switch to exponents)
  return string.format('%d', n)
end

-- The record of order `id` as a table {state, qty, deadline, user}, or nil.
local function read_order(id)
  local value = redis.call('HGET', K.orders, id)
  if not value then return nil end
  local a = string.find(value, '|', 1, true)
  local b = string.find(value, '|', a + 1, true)
  local c = string.find(value, '|', b + 1, true)
  return {state = string.sub(value, 1, a - 1), qty = tonumber(string.sub(value, a + 1, b - 1)),
          deadline = tonumber(string.sub(value, b + 1, c - 1)), user = string.sub(value, c + 1)}
end

local function write_order(id, o)  -- concatenation, not format: user may hold any byte
  redis.call('HSET', K.orders, id, o.state .. '|' .. int(o.qty) .. '|' .. int(o.deadline)
    .. '|' .. o.user)
end

local function user_prefix(user)
  return int(#user) .. ':' .. user
end

local function user_hold(o, id)
  return user_prefix(o.user) .. string.format('%015d', o.deadline) .. id
end

local function add_units(user, n)
  if redis.call('HINCRBY', K.users, user, n) <= 0 then redis.call('HDEL', K.users, user) end
end

local function order_reply(status, o, now, changed)
  return {status, o.state, o.qty, o.deadline, now, o.user, changed}
end

-- Take `qty` units for a new order `id`; `available` (>= qty, the caller checked) and
-- `reserved` are the stock's counts as they stand, so one HSET writes both.
local function hold(id, user, qty, deadline, available, reserved)
  redis.call('HSET', K.stock, 'available', int(available - qty), 'reserved', int(reserved + qty))
  add_units(user, qty)
  local o = {state = 'reserved', qty = qty, deadline = deadline, user = user}
  redis.call('ZADD', K.holds, deadline, id)
  redis.call('ZADD', K.userholds, 0, user_hold(o, id))
  write_order(id, o)
  return o
end

-- Close reserved order `id` into `state` (sold, cancelled or expired) at `now`: its hold
-- leaves both sorted sets; sold units stay counted for the user, the others return to
-- available. With a retention, the order is to be forgotten RETAIN ms from now.
local function close(id, o, state, now)
  redis.call('ZREM', K.holds, id)
  redis.call('ZREM', K.userholds, user_hold(o, id))
  redis.call('HINCRBY', K.stock, 'reserved', -o.qty)
  if state == 'sold' then
    redis.call('HINCRBY', K.stock, 'sold', o.qty)
  else
    redis.call('HINCRBY', K.stock, 'available', o.qty)
    add_units(o.user, -o.qty)
  end
  o.state = state
  write_order(id, o)
  if RETAIN > 0 then redis.call('ZADD', K.settled, now + RETAIN, id) end
end

-- If `o` is reserved past its deadline, expire it. Returns the units freed.
local function settle(id, o, now)
  if o.state ~= 'reserved' or o.deadline > now then return 0 end
  close(id, o, 'expired', now)
  return o.qty
end

-- Settle up to `count` expired holds of anyone, oldest first: {units freed, holds seen}.
local function settle_oldest(now, count)
  local ids = redis.call('ZRANGEBYSCORE', K.holds, '-inf', now, 'LIMIT', 0, count)
  local freed = 0
  for _, id in ipairs(ids) do
    local o = read_order(id)
    if o and o.state == 'reserved' then
      freed = freed + settle(id, o, now)
    else
      redis.call('ZREM', K.holds, id)  -- a stray entry: never written by these scripts
    end
  end
  return freed, #ids
end

-- Settle up to `count` expired holds of `user`, oldest first: {units freed, holds seen}.
local function settle_user(user, now, count)
  local prefix = user_prefix(user)
  local members = redis.call('ZRANGEBYLEX', K.userholds, '[' .. prefix,
    '(' .. prefix .. string.format('%015d', now + 1), 'LIMIT', 0, count)
  local freed = 0
  for _, member in ipairs(members) do
    local id = string.sub(member, #prefix + 16)
    local o = read_order(id)
    if o and o.state == 'reserved' then
      freed = freed + settle(id, o, now)
    else
      redis.call('ZREM', K.userholds, member)  -- a stray entry
    end
  end
  return freed, #members
end

-- Forget up to `count` settled orders whose retention ran out, oldest first.
local function forget(now, count)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.settled, '-inf', now, 'LIMIT', 0, count)) do
    local o = read_order(id)
    if o and o.state ~= 'reserved' then redis.call('HDEL', K.orders, id) end
    redis.call('ZREM', K.settled, id)
  end
end

-- The housekeeping of every writing script: settle SWEEP expired holds, then (with a
-- retention) forget SWEEP orders past it. Bounded work per call.
local function sweep(now)
  settle_oldest(now, SWEEP)
  if RETAIN > 0 then forget(now, SWEEP) end
end

-- The counts, with the expired holds not yet settled counted as available. Read-only; its
-- work grows with those holds (writing scripts settle SWEEP of them per call).
local function stock_reply(now)
  local s = redis.call('HMGET', K.stock, 'available', 'reserved', 'sold', 'total')
  local expired = 0
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.holds, '-inf', now)) do
    local o = read_order(id)
    if o and o.state == 'reserved' then expired = expired + o.qty end
  end
  return {'stock', tonumber(s[1] or '0') + expired, tonumber(s[2] or '0') - expired,
          tonumber(s[3] or '0'), tonumber(s[4] or '0')}
end

-- confirm or cancel order `id`, as TRANSITIONS says.
local function transition(action, id)
  local now = now_ms()
  sweep(now)
  local o = read_order(id)
  if not o then return {'missing'} end
  settle(id, o, now)
  local to = TRANSITIONS[action][o.state]
  if to == 'closed' then return order_reply('closed', o, now, 0) end
  if to == 'same' then return order_reply('order', o, now, 0) end
  close(id, o, to, now)
  return order_reply('order', o, now, 1)
end
