-- shared_lib.lua: a resource of `capacity` units shared by leased holders, with a FIFO queue of
-- waiters that each ask for some units, after common_lib.lua. Semaphore (1 unit per permit),
-- ReadWriteLock (a reader asks 1 unit, a writer all of them) and Election (capacity 1) are
-- built on it.
-- Provides: shared_keys, purge, walk, capacity, keep, grant_units, refusal, notify, forget,
-- units_of, held_units. Loaded by: _core/shared.py, semaphore.py, election.py, breakglass.py.
--
-- The key layout (all keys share the hash tag {name}: one Redis Cluster slot):
--   holders   ZSET    holder token -> end of its lease (server ms)
--   units     HASH    token -> units it holds or asks for (absent: 1)
--   queue     ZSET    waiter token -> when it joined (server us): FIFO order
--   granted   ZSET    queued token -> deadline (server ms) to take the units reserved for it
--   fence     STRING  counter raised by every grant (next_fence): never expires, never reset
--   capacity  STRING  the stored capacity (Semaphore's permits; others pass it in ARGV)
--   payload   HASH    holder token -> "<fence> <value>" (value: Election's leader's; else ""), and
--                     field '' -> the same of the latest grant with a value (kept, as fence)
-- (units and payload have no expiry: a holder's entries are deleted with it, as it is purged)
--   watchers  ZSET    tokens told "H<token> 0" whenever the set of holders changes
-- A waiter is served when every waiter ahead of it fits along with it (strict FIFO: a writer
-- waiting for everything stops new readers). When units free up, every queued waiter that now
-- fits is reserved for `window` ms and told "H<token> <window>" (several at once: readers,
-- permits); the first one that does not fit is told "N<token> <window>" so that it checks,
-- after the window, that the reserved ones took their turn (a dead one is dropped then).

local function units_of(S, token)
  return tonumber(redis.call('HGET', S.units, token) or '1')
end

local function forget(S, token)
  redis.call('HDEL', S.units, token)
  redis.call('HDEL', S.payload, token)
end

-- Tell every watcher that the holders changed.
local function notify(S)
  for _, t in ipairs(redis.call('ZRANGE', S.watchers, 0, -1)) do
    tell(S.channels, t, 'H', 0)
  end
end

-- Drop leases that ran out and reservations that lapsed (dead or too slow waiters).
local function purge(S, now)
  local dropped = false
  for _, t in ipairs(redis.call('ZRANGEBYSCORE', S.holders, '-inf', now)) do
    redis.call('ZREM', S.holders, t)
    forget(S, t)
    dropped = true
  end
  for _, t in ipairs(redis.call('ZRANGEBYSCORE', S.granted, '-inf', now)) do
    redis.call('ZREM', S.granted, t)
    redis.call('ZREM', S.queue, t)
    forget(S, t)
  end
  if dropped then notify(S) end
  return dropped
end

local function held_units(S)
  local n = 0
  for _, t in ipairs(redis.call('ZRANGE', S.holders, 0, -1)) do n = n + units_of(S, t) end
  return n
end

-- The capacity: ARGV's, or the stored one when `stored` (set from ARGV's if absent).
local function capacity(S, cap, stored)
  if not stored then return cap end
  local value = redis.call('GET', S.capacity)
  if value then return tonumber(value) end
  redis.call('SET', S.capacity, cap)
  return cap
end

-- Walk the queue in order: reserve (and wake) every waiter that fits, stop at the first that
-- does not. Returns whether `me` (a queued token, or nil) is within the fitting prefix, the
-- units taken by holders and that prefix, whether the whole queue fits, and the first waiter
-- that does not fit (nil if all do): the one that checks on the reserved ones.
local function walk(S, cap, now, window, me)
  local n = held_units(S)
  local mine, woke = false, false
  for _, t in ipairs(redis.call('ZRANGE', S.queue, 0, -1)) do
    local u = units_of(S, t)
    local reserved = redis.call('ZSCORE', S.granted, t)
    if n + u > cap then
      -- A reservation that no longer fits (the capacity was lowered) is withdrawn.
      if reserved then redis.call('ZREM', S.granted, t) end
      if woke then tell(S.channels, t, 'N', window) end
      return mine, n, false, t
    end
    n = n + u
    if t == me then
      mine = true
    elseif not reserved then
      redis.call('ZADD', S.granted, now + window, t)
      tell(S.channels, t, 'H', window)
      woke = true
    end
  end
  return mine, n, true, nil
end

-- Keep a key alive at least `ms` (the holders' and the queue's keys vanish once abandoned).
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end

-- Make `token` a holder of `want` units for `lease` ms; its fencing token.
local function grant_units(S, token, want, lease, now, value)
  redis.call('ZREM', S.queue, token)
  redis.call('ZREM', S.granted, token)
  redis.call('ZADD', S.holders, now + lease, token)
  if want ~= 1 then redis.call('HSET', S.units, token, want) else redis.call('HDEL', S.units, token) end
  local fence = next_fence(S.fence)
  -- Every holder's fence is kept (Election: with its value): inspect tells who holds what
  -- since when from it (a fence is the server's time of the grant, see _core/holder.py).
  -- Field '' keeps the latest grant with a value, for watchers that look after it ended.
  local entry = string.format('%d', fence) .. ' ' .. (value or '')
  if value then
    redis.call('HSET', S.payload, token, entry, '', entry)
  else
    redis.call('HSET', S.payload, token, entry)
  end
  keep(S.holders, 3 * lease)  -- units and payload never expire: entries go with their holder
  notify(S)
  return fence
end

-- What a refused waiter should wait for: the first waiter that does not fit (`checker`)
-- gets {2, ms} until a reservation ahead lapses; every other one {0, ms} until the first
-- lease ends (-1: nobody holds anything), and is woken by its own reservation before that.
-- (Were every waiter told of reservations, each would look again after every hand-off.)
local function refusal(S, now, checker)
  local first
  if checker then
    first = redis.call('ZRANGE', S.granted, 0, 0, 'WITHSCORES')[2]
    if first then return {2, math.max(tonumber(first) - now, 1)} end
  end
  first = redis.call('ZRANGE', S.holders, 0, 0, 'WITHSCORES')[2]
  if first then return {0, math.max(tonumber(first) - now, 1)} end
  return {0, -1}
end

-- The standard KEYS of the shared scripts, in order.
local function shared_keys(channels)
  return {holders = KEYS[1], units = KEYS[2], queue = KEYS[3], granted = KEYS[4],
          fence = KEYS[5], capacity = KEYS[6], payload = KEYS[7], watchers = KEYS[8],
          channels = channels}
end
