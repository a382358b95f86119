-- acquire.lua: take the lock if it is free and no other waiter is ahead in the queue.
--
-- KEYS[1] lock     STRING  holder's token, PX lease
-- KEYS[2] fence    STRING  fencing counter (never expires)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] handoff  STRING  reservation for the queue head (mode R); head since (mode B)
-- ARGV[1] token    this acquisition's random token (>= 128 bits)
-- ARGV[2] lease    lease in ms (integer > 0)
-- ARGV[3] join     "1": if refused, join the queue (the caller is subscribed); "0": don't
-- ARGV[4] window   ms a reserved queue head has to take the free lock (mode R), or a granted
--                  one to claim it (modes G and B)
-- ARGV[5] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[6] score    optional ("" = none): the waiter's place in the queue; Redlock sends the same
--                  ticket to every server so that all their queues agree. Default: server time
-- ARGV[7] mode     optional: "G" fair, direct grants (Lock); "B" barging (Lock fair=False);
--                  "R" (default) reservations (Redlock). See lock_lib.lua.
-- ARGV[8] tell     optional: "0" takes the lock without telling the next waiter that it did (the
--                  T message; Redlock tells it from a few of its servers only: one message is
--                  enough). Reservations (H, N) are told all the same.
-- Returns {1, fence}       acquired; fence = the new fencing token (strictly increasing per name,
--                          at least the server's time in us: common_lib.lua's next_fence;
--                          mode R: in whole seconds, so the servers of one round agree)
--                          Mode R: {1, 0, us} when this server has no counter for the name
--                          (never used here, or the server lost its data): none is created;
--                          us = the server's time in us; the client writes the merged fence
--                          back (fence.lua) if it may count
--         {0, pttl, now}  held by someone else; pttl = ms left on its lease (-1: no expiry)
--         {2, ms, now, rank}  free, but reserved for the queue head for ms more (mode R);
--                          rank = the caller's place in the queue: 0 head, 1 next, 2 further
--                          back, -1 not queued;
--                          only the waiter right behind the head (rank 1) need check, when
--                          the ms run out, that the head took its turn (N tells it otherwise)
--         now = the server's time in ms
local lock, fence, queue, handoff = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease, window, channels = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4]), ARGV[5]
local join = ARGV[3] == '1'
local score = tonumber(ARGV[6] or '')
local mode = ARGV[7] or 'R'
local told = ARGV[8] ~= '0' and channels  -- where the T message goes (false: nowhere)

local function refuse(status, ms)
  if join then enqueue(queue, token, score or now_us(), lease, window, ms) end
  return {status, ms, now_ms()}  -- the server's clock: see ServerClock in _core/waiters.py
end

-- Tell the waiter after us that we took it, and for how long (it sleeps until then).
local function took(dequeue)
  if dequeue and redis.call('ZREM', queue, token) == 1 then
    local next = told and redis.call('ZRANGE', queue, 0, 0)[1]
    if next then tell(told, next, 'T', lease) end
  end
end

-- The lock is held. By us? Then a release granted it to us and we did not hear (our
-- subscription broke): claim it. Nobody took the lock since the grant: the counter is our fence.
local function held()
  if redis.call('GET', lock) == token then
    redis.call('PEXPIRE', lock, lease)
    local next = told and redis.call('ZRANGE', queue, 0, 0)[1]
    if next then tell(told, next, 'T', lease) end
    return {1, tonumber(redis.call('GET', fence))}
  end
  return refuse(0, redis.call('PTTL', lock))
end

if mode == 'B' then  -- barging: whoever comes first while it is free takes it
  if not redis.call('SET', lock, token, 'NX', 'PX', lease) then return held() end
  if redis.call('ZREM', queue, token) == 1 then
    local since = redis.call('GET', handoff)
    if since and string.sub(since, 1, #token + 1) == token .. ' ' then
      redis.call('DEL', handoff)
    end
  end
  return {1, next_fence(fence)}
end

if mode == 'G' then
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head or head == token then  -- nobody ahead (the uncontended path: three calls)
    if not redis.call('SET', lock, token, 'NX', 'PX', lease) then return held() end
    took(head)
    return {1, next_fence(fence)}
  end
  if redis.call('EXISTS', lock) == 1 then return held() end
  -- Free, with others ahead of us (a lease ran out, or a grantee never claimed): the first
  -- one that listens is granted it now; we take it only if nobody ahead of us listens.
  head = grant_lock(lock, fence, queue, channels, window, token)
  if head and head ~= token then return refuse(0, window) end
  redis.call('SET', lock, token, 'PX', lease)
  took(head)
  return {1, next_fence(fence)}
end

-- Mode R (Redlock): a counter is only ever raised, never created: a server that lost its data
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

-- Mode R. Nobody queued ahead of us: try the lock itself (the uncontended path).
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
