-- lock_lib.lua: helpers prepended to every lock script (acquire, release, leave).
--
-- The key layout of one lock (all keys share the hash tag {name}, so they live in one
-- Redis Cluster slot):
--   lock     STRING  the holder's token, PX = lease. Existence IS the lock.
--   fence    STRING  fencing counter: INCR'd by every acquisition. Never expires, never reset.
--   queue    ZSET    waiter token -> when it joined (us; server time, or Redlock's ticket).
--   handoff  STRING  "<token> <deadline ms>": the free lock is reserved for that queue head.
-- A token is "<process id>.<random>"; each process listens on its own channel
-- <channels><process id>, and is told only what concerns its own waiters. On a Redis Cluster
-- <channels> carries the lock's hash tag ("redlease:waiters:{<name>}:"): the channel is in
-- the lock's slot and is told with SPUBLISH (sharded, Redis >= 7.0; never broadcast to every
-- node). Without a tag (one server, any version): PUBLISH.
--   "H<token> <window ms>"  the lock is free and reserved for <token> for <window ms>
--   "N<token> <window ms>"  the waiter ahead of <token> has <window ms> to take it
--   "T<token> <lease ms>"   the waiter ahead of <token> took it, with a lease of <lease ms>

-- Server time in us. Hold deadlines use the server's clock, never a client's.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Tell the process that queued `token` (tokens without a process id are nobody's to tell).
local function tell(channels, token, message)
  local dot = string.find(token, '.', 1, true)
  if not dot then return end
  local command = string.find(channels, '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
  redis.call(command, channels .. string.sub(token, 1, dot - 1), message)
end

-- Reserve the free lock for `head` for `window_ms`, tell it, and tell the waiter after it
-- when to check that the head took it (a dead head is skipped then).
local function reserve(queue, handoff, channels, head, window_ms)
  local deadline = math.floor(now_us() / 1000) + window_ms
  -- The key outlives the deadline so that an expired reservation can be told apart from none.
  redis.call('SET', handoff, head .. ' ' .. deadline, 'PX', window_ms * 4)
  tell(channels, head, 'H' .. head .. ' ' .. window_ms)
  local second = redis.call('ZRANGE', queue, 1, 1)[1]
  if second then tell(channels, second, 'N' .. second .. ' ' .. window_ms) end
end

-- After the lock became free: reserve it for the queue head, if there is one.
local function hand_off(queue, handoff, channels, window_ms)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if head then reserve(queue, handoff, channels, head, window_ms) end
end

-- The reservation stored in `handoff`: holder token and deadline (ms), or nil.
local function reservation(handoff)
  local value = redis.call('GET', handoff)
  if not value then return nil, nil end
  local space = string.find(value, ' ', 1, true)
  return string.sub(value, 1, space - 1), tonumber(string.sub(value, space + 1))
end
