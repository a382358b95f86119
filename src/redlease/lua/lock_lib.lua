-- lock_lib.lua: helpers prepended to every lock script (acquire, release, leave).
--
-- The key layout of one lock (all keys share the hash tag {name}, so they live in one
-- Redis Cluster slot):
--   lock     STRING  the holder's token, PX = lease. Existence IS the lock.
--   fence    STRING  fencing counter: INCR'd by every acquisition. Never expires, never reset.
--   queue    ZSET    waiter token -> when it joined (us; server time, or Redlock's ticket).
--   handoff  STRING  "<token> <ms>": reservation mode (Redlock): the free lock is reserved for
--                    that queue head until <ms>; barging mode: <token> became the queue head at <ms>.
-- A token is "<process id>.<random>"; each process listens on its own channel
-- <channels><process id>, and is told only what concerns its own waiters. On a Redis Cluster
-- <channels> carries the lock's hash tag ("redlease:waiters:{<name>}:"): the channel is in
-- the lock's slot and is told with SPUBLISH (sharded, Redis >= 7.0; never broadcast to every
-- node). Without a tag (one server, any version): PUBLISH.
--   "G<token> <fence> <ms> <now>"  the lock was GRANTED to <token> (direct hand-off): it holds
--                           it with fencing token <fence> and a lease of <ms> until it claims it;
--                           <now> is the server's time in ms (how late the message is read)
--   "H<token> <window ms>"  the lock is free and reserved for <token> for <window ms>
--   "F<token> <ms>"         the lock is free (barging mode): try now; it is handed to you
--                           directly at a release <ms> from now, if others keep taking it
--   "N<token> <window ms>"  the waiter ahead of <token> has <window ms> to take or claim it
--   "T<token> <lease ms>"   the waiter ahead of <token> took it, with a lease of <lease ms>
--
-- Three hand-off modes (ARGV "mode" of acquire, release and leave):
--   'G' fair, direct: release grants the lock to the queue head itself (Lock, RLock)
--   'B' barging: release frees the lock and wakes the queue head; anyone may take it, but a
--       head that has waited <barge ms> at the head is granted it at the next release
--   'R' reservation: release reserves the free lock for the head, which takes it (Redlock,
--       whose servers must agree on one holder, so no server grants on its own)

-- Server time in us. Hold deadlines use the server's clock, never a client's.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Server time in ms.
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- Tell the process that queued `token` (tokens without a process id are nobody's to tell).
-- Returns how many subscribers heard it: 0 means that process does not listen (it died, or
-- its subscription broke), so it cannot take a turn it is given.
local function tell(channels, token, message)
  local dot = channels and string.find(token, '.', 1, true)  -- channels false: tell nobody
  if not dot then return 0 end
  local command = string.find(channels, '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
  return redis.call(command, channels .. string.sub(token, 1, dot - 1), message)
end

local SKIP = 16  -- most deaf waiters one script skips (bounded work per call)

-- Grant the free lock to the first queued waiter whose process listens, unless that is
-- `caller` (who takes it itself; returned, still queued). The grantee holds it from now on
-- with a fresh fence and a lease of `claim_ms`, which it extends to its own lease when it
-- hears of it (claim.lua); a grantee that never does is skipped when that short lease ends
-- (the next waiter is told when to check). Returns the token granted to, `caller`, or nil.
local function grant(lock, fence, queue, channels, claim_ms, caller)
  for _ = 1, SKIP do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head or head == caller then return head end
    redis.call('ZREM', queue, head)
    local issued = redis.call('INCR', fence)
    local message = 'G' .. head .. ' ' .. issued .. ' ' .. claim_ms .. ' ' .. now_ms()
    if tell(channels, head, message) > 0 then
      redis.call('SET', lock, head, 'PX', claim_ms)
      local second = redis.call('ZRANGE', queue, 0, 0)[1]
      if second then tell(channels, second, 'N' .. second .. ' ' .. claim_ms) end
      return head
    end
  end
  local head = redis.call('ZRANGE', queue, 0, 0)[1]  -- more deaf ones: let the head sort it out
  if head then tell(channels, head, 'N' .. head .. ' 0') end
  return nil
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

-- Barging mode, after the lock became free: wake the queue head, which may race others for
-- it; once it has been the head for `barge_ms`, grant it the lock instead (so nobody waits
-- long behind processes that keep re-taking it).
local function barge(lock, fence, queue, handoff, channels, claim_ms, barge_ms)
  for _ = 1, SKIP do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then redis.call('DEL', handoff) return end
    local since = redis.call('GET', handoff)
    local now = math.floor(now_us() / 1000)
    if since and string.sub(since, 1, #head + 1) == head .. ' ' then
      if now - tonumber(string.sub(since, #head + 2)) >= barge_ms then
        redis.call('DEL', handoff)
        grant(lock, fence, queue, channels, claim_ms, nil)
      end
      return  -- told already: it is trying, or checks again when its turn is due
    end
    if tell(channels, head, 'F' .. head .. ' ' .. barge_ms) > 0 then
      redis.call('SET', handoff, head .. ' ' .. now, 'PX', barge_ms * 4 + claim_ms)
      return
    end
    redis.call('ZREM', queue, head)  -- nobody listens for it: skip it
  end
end

-- The lock became free (released, or given up by a grantee): pass it on as `mode` says.
local function pass_on(lock, fence, queue, handoff, channels, window, mode, barge_ms)
  if mode == 'G' then
    grant(lock, fence, queue, channels, window, nil)
  elseif mode == 'B' then
    barge(lock, fence, queue, handoff, channels, window, barge_ms)
  else
    hand_off(queue, handoff, channels, window)
  end
end

-- The reservation stored in `handoff`: holder token and deadline (ms), or nil.
local function reservation(handoff)
  local value = redis.call('GET', handoff)
  if not value then return nil, nil end
  local space = string.find(value, ' ', 1, true)
  return string.sub(value, 1, space - 1), tonumber(string.sub(value, space + 1))
end
