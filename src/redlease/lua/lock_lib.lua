-- lock_lib.lua: helpers prepended to every lock script (acquire, release, leave).
--
-- The key layout of one lock (all keys share the hash tag {name}, so they live in one
-- Redis Cluster slot):
--   lock     STRING  the holder's token, PX = lease. Existence IS the lock.
--   fence    STRING  fencing counter: INCR'd by every acquisition. Never expires, never reset.
--   queue    ZSET    waiter token -> when it joined (us; server time, or Redlock's ticket).
--   handoff  STRING  "<token> <deadline ms>": the free lock is reserved for that queue head.
-- Waiters are told on the channel <prefix>:{name}:released:
--   "F"        the lock is free and nobody queues: one waiter per process may try
--   "H<token> <window ms>"  the lock is free and reserved for <token> for <window ms>
--   "T<lease ms>"           the reserved waiter took it, with a lease of <lease ms>

-- Server time in ms and us. Hold deadlines use the server's clock, never a client's.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Reserve the free lock for `head` for `window_ms` and tell the waiters.
local function reserve(handoff, channel, head, window_ms)
  local deadline = math.floor(now_us() / 1000) + window_ms
  -- The key outlives the deadline so that an expired reservation can be told apart from none.
  redis.call('SET', handoff, head .. ' ' .. deadline, 'PX', window_ms * 4)
  redis.call('PUBLISH', channel, 'H' .. head .. ' ' .. window_ms)
end

-- After the lock became free: reserve it for the queue head, or say it is free.
local function hand_off(queue, handoff, channel, window_ms)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if head then
    reserve(handoff, channel, head, window_ms)
  else
    redis.call('PUBLISH', channel, 'F')
  end
end

-- The reservation stored in `handoff`: holder token and deadline (ms), or nil.
local function reservation(handoff)
  local value = redis.call('GET', handoff)
  if not value then return nil, nil end
  local space = string.find(value, ' ', 1, true)
  return string.sub(value, 1, space - 1), tonumber(string.sub(value, space + 1))
end
