-- lock_lib.lua: the hand-off of one lock to its queued waiters, after common_lib.lua.
-- Provides: enqueue, turn_ms, crown, grant_lock, reserve, hand_off, barge, pass_on,
-- reservation. Loaded by: _core/lock.py (acquire_fair, acquire_barging, acquire_reserving,
-- release, leave, claim) and _core/breakglass.py (force_release).
--
-- The key layout of one lock (all keys share the hash tag {name}, so they live in one
-- Redis Cluster slot):
--   lock     STRING  the holder's token, PX = lease. Existence IS the lock.
--   fence    STRING  fencing counter: raised by every acquisition (next_fence). Never reset;
--                    never expires, unless its owner gave it an expiry (redlease.cached's
--                    rebuild locks): next_fence keeps it.
--   queue    ZSET    waiter token -> when it joined (us; server time, or Redlock's ticket).
--   handoff  STRING  "<token> <ms>": reservation mode (Redlock): the free lock is reserved for
--                    that queue head until <ms>; barging mode, "<token> <ms> <turn>": <token>
--                    became the queue head at <ms>, and is granted the lock at the first
--                    release <turn> ms later.
-- The messages told to waiters (G, H, F, N, T) are listed in common_lib.lua.
--
-- Three hand-off modes (ARGV "mode" of release and leave; an acquire script per mode):
--   'G' fair, direct: release grants the lock to the queue head itself (Lock, RLock;
--       acquire_fair.lua)
--   'B' barging: release frees the lock and wakes the queue head; anyone may take it, but a
--       head that has waited its turn at the head (turn_ms) is granted it at the next release
--       (acquire_barging.lua)
--   'R' reservation: release reserves the free lock for the head, which takes it (Redlock,
--       whose servers must agree on one holder, so no server grants on its own;
--       acquire_reserving.lua)

-- Queue `token` at `score` unless it is queued already, and keep the queue alive: live waiters
-- retry at least once per lease (`ms`: the longest they were told to sleep); an abandoned
-- queue disappears by itself.
local function enqueue(queue, token, score, lease, window, ms)
  redis.call('ZADD', queue, 'NX', score, token)
  local keep = 3 * math.max(lease, ms) + 10 * window
  if redis.call('PTTL', queue) < keep then redis.call('PEXPIRE', queue, keep) end
end

local SKIP = 16  -- most deaf waiters one script skips (bounded work per call)

-- Barging mode: how long a new queue head waits at the head before a release grants it the
-- lock. With `rotation_ms`, the waiters queued now share it (so the whole queue turns over in
-- about that much, however long it is), at least 1 ms and at most `barge_ms`; without, it is
-- `barge_ms`. Few waiters: the holder keeps it longer (throughput); many: each turn is short
-- (the longest wait stays near `rotation_ms` plus the hand-offs).
local function turn_ms(queue, barge_ms, rotation_ms)
  if not rotation_ms or rotation_ms <= 0 then return barge_ms end
  local queued = math.max(1, redis.call('ZCARD', queue))
  return math.max(1, math.min(barge_ms, math.floor(rotation_ms / queued)))
end

-- Barging mode: record `head` as the queue head since `now` (told so: woken), to be granted
-- the lock at the first release `turn` ms later. The record outlives the turn, so that a
-- release after it still finds it.
local function crown(handoff, head, now, turn, claim_ms)
  redis.call('SET', handoff, head .. ' ' .. now .. ' ' .. turn, 'PX', turn * 4 + claim_ms)
end

-- Grant the free lock to the first queued waiter whose process listens, unless that is
-- `caller` (who takes it itself; returned, still queued). The grantee holds it from now on
-- with a fresh fence and a lease of `claim_ms`, which it extends to its own lease when it
-- hears of it (claim.lua); a grantee that never does is skipped when that short lease ends
-- (the next waiter is told when to check). A head that joined the queue less than `claim_ms`
-- ago is granted `lease_ms` instead, if given (the releaser's lease): it was alive that
-- recently, as a caller that takes the lock itself is, so nothing is claimed or checked.
-- Returns the token granted to, `caller`, or nil.
local function grant_lock(lock, fence, queue, channels, claim_ms, caller, lease_ms)
  for _ = 1, SKIP do
    local first = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    local head = first[1]
    if not head or head == caller then return head end
    redis.call('ZREM', queue, head)
    local issued = next_fence(fence)
    local now = now_us()
    local granted = claim_ms
    if lease_ms and now - tonumber(first[2]) < claim_ms * 1000 then granted = lease_ms end
    local detail = string.format('%d %d %d', issued, granted, math.floor(now / 1000))
    if tell(channels, head, 'G', detail) > 0 then
      redis.call('SET', lock, head, 'PX', granted)
      local second = granted == claim_ms and redis.call('ZRANGE', queue, 0, 0)[1]
      if second then tell(channels, second, 'N', claim_ms) end
      return head
    end
  end
  local head = redis.call('ZRANGE', queue, 0, 0)[1]  -- more deaf ones: let the head sort it out
  if head then tell(channels, head, 'N', 0) end
  return nil
end

-- Reserve the free lock for `head` for `window_ms`, tell it (unless it is `quiet`: it knows),
-- and tell the waiter after it when to check that the head took it (a dead head is skipped
-- then).
local function reserve(queue, handoff, channels, head, window_ms, quiet)
  local deadline = now_ms() + window_ms
  -- The key outlives the deadline so that an expired reservation can be told apart from none.
  redis.call('SET', handoff, head .. ' ' .. deadline, 'PX', window_ms * 4)
  if head ~= quiet then tell(channels, head, 'H', window_ms) end
  local second = redis.call('ZRANGE', queue, 1, 1)[1]
  if second then tell(channels, second, 'N', window_ms) end
end

-- After the lock became free: reserve it for the queue head, if there is one.
local function hand_off(queue, handoff, channels, window_ms, quiet)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if head then reserve(queue, handoff, channels, head, window_ms, quiet) end
end

-- Barging mode, after the lock became free: wake the queue head, which may race others for
-- it; once it has been the head for its turn (turn_ms), grant it the lock instead (so nobody
-- waits long behind processes that keep re-taking it). A head woken once is not told again:
-- it is trying, or checks on its own when its turn is over. (Waking the new head at the
-- first release after a grant costs it a lost race most of the time, but takes the lock
-- whenever that holder stalls between its release and its re-take: crowning the new head
-- silently at the grant instead measured fewer messages and attempts per acquisition and
-- slower hand-offs, 1.5-2x the p50, on a loaded machine: the lock idled while its holder
-- was descheduled.)
local function barge(lock, fence, queue, handoff, channels, claim_ms, barge_ms, rotation_ms)
  for _ = 1, SKIP do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then redis.call('DEL', handoff) return end
    local record = redis.call('GET', handoff)
    local now = now_ms()
    local since, turn
    if record and string.sub(record, 1, #head + 1) == head .. ' ' then
      since, turn = string.match(string.sub(record, #head + 2), '^(%d+) (%d+)$')
    end
    if since then
      -- A turn only ever shrinks (the queue grew since it began: the first heads of a crowd
      -- must not keep the long turns of a short queue); a longer one would pass its own
      -- check, which is what takes a lock left free.
      turn = math.min(tonumber(turn), turn_ms(queue, barge_ms, rotation_ms))
      if now - tonumber(since) >= turn then
        redis.call('DEL', handoff)
        grant_lock(lock, fence, queue, channels, claim_ms, nil)
      end
      return
    end
    turn = turn_ms(queue, barge_ms, rotation_ms)
    if tell(channels, head, 'F', turn) > 0 then
      crown(handoff, head, now, turn, claim_ms)
      return
    end
    redis.call('ZREM', queue, head)  -- nobody listens for it: skip it
  end
end

-- The lock became free (released, or given up by a grantee): pass it on as `mode` says
-- (`lease_ms`, mode G: the releaser's lease, for a head that joined within the window).
local function pass_on(lock, fence, queue, handoff, channels, window, mode, barge_ms, rotation_ms,
                       lease_ms)
  if mode == 'G' then
    grant_lock(lock, fence, queue, channels, window, nil, lease_ms)
  elseif mode == 'B' then
    barge(lock, fence, queue, handoff, channels, window, barge_ms, rotation_ms)
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
