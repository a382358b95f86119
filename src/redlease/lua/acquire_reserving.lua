-- acquire_reserving.lua: take the lock if it is free and no other waiter is ahead in the
-- queue; Redlock's, on each server (a release reserves the lock for the queue head, which
-- takes it: lock_lib.lua's mode R).
--
-- KEYS[1..4] lock, fence, queue, handoff; ARGV[1..5] token, lease, join, window, channels:
--          as acquire_lib.lua gives them
-- ARGV[6] score    the waiter's place in the queue ("": the server's time); Redlock sends the
--                  same ticket to every server so that all their queues agree
-- ARGV[7] tell     "0" takes the lock without telling the next waiter that it did (the T
--                  message; Redlock tells it from a few of its servers only: one message is
--                  enough), "1" tells it. Reservations (H, N) are told all the same.
-- Returns {1, fence}       acquired; fence = the new fencing token (strictly increasing per name,
--                          at least the server's time in us: common_lib.lua's next_fence,
--                          in whole seconds, so the servers of one round agree);
--                          {1, 0, us} when this server has no counter for the name
--                          (never used here, or the server lost its data): none is created;
--                          us = the server's time in us; the client writes the merged fence
--                          back (fence.lua) if it may count
--         {0, pttl, now}  held by someone else; pttl = ms left on its lease (-1: no expiry)
--         {2, ms, now, rank}  free, but reserved for the queue head for ms more;
--                          rank = the caller's place in the queue: 0 head, 1 next, 2 further
--                          back, -1 not queued;
--                          only the waiter right behind the head (rank 1) need check, when
--                          the ms run out, that the head took its turn (N tells it otherwise)
--         now = the server's time in ms
score = tonumber(ARGV[6])
if ARGV[7] == '0' then told = false end

-- A counter is only ever raised, never created: a server that lost its data
-- must not hand out a count from 0 (see redlock.py). A missing counter answers 0 and the
-- server's time in us; fence.lua creates it with the merged fence. The fence is next_fence's
-- with the time rounded down to the second: the servers of a round, whose counters agree
-- since the last write-back, then issue the same fence, and none needs it written back. It
-- stays at most the server's time, so a fence after the counter's loss is still larger.
local function granted()
  if redis.call('EXISTS', fence) == 0 then return {1, 0, now_us()} end
  local us = now_us()
  local issued = math.max(tonumber(redis.call('GET', fence)) + 1, us - us % 1000000)
  redis.call('SET', fence, string.format('%d', issued))
  return {1, issued}
end

-- Nobody queued ahead of us: try the lock itself (the uncontended path).
local head = redis.call('ZRANGE', queue, 0, 0)[1]
if not head or head == token then
  if not redis.call('SET', lock, token, 'NX', 'PX', lease) then
    return refuse(0, redis.call('PTTL', lock))
  end
  if head then  -- we were the queue head: tell the next one how long we may hold it
    redis.call('DEL', handoff)
    took(true)
  end
  return granted()
end

-- Refused: the free lock is reserved for the head for `ms` more. Say where the caller stands:
-- the waiters behind the next one need not check that the head takes its turn.
-- (ZRANGE and ZSCORE, not ZRANK: the ACL rules users were given name no ZRANK.)
local function reserved(ms)
  local reply = refuse(2, ms)
  local first = redis.call('ZRANGE', queue, 0, 1)
  local rank = -1
  if first[1] == token then rank = 0
  elseif first[2] == token then rank = 1
  elseif redis.call('ZSCORE', queue, token) then rank = 2 end
  reply[4] = rank
  return reply
end

-- Another waiter is ahead. Only the queue head may take the free lock; skip a head whose
-- turn ran out.
local pttl = redis.call('PTTL', lock)
if pttl ~= -2 then return refuse(0, pttl) end
local holder, deadline = reservation(handoff)
if holder == head then
  local left = deadline - now_ms()
  if left > 0 then return reserved(left) end
  redis.call('ZREM', queue, head)   -- it missed its turn (crashed, or too slow): skip it
  redis.call('DEL', handoff)
  head = redis.call('ZRANGE', queue, 0, 0)[1]
end
if head and head ~= token then
  reserve(queue, handoff, channels, head, window)  -- e.g. the lease ran out, no release
  return reserved(window)
end

-- The skipped head was the only one ahead of us (or the queue is now empty).
redis.call('SET', lock, token, 'PX', lease)
took(head)
return granted()
