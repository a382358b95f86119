-- acquire.lua: take the lock if it is free and no other waiter is ahead in the queue.
--
-- KEYS[1] lock     STRING  holder's token, PX lease
-- KEYS[2] fence    STRING  fencing counter (never expires)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] handoff  STRING  reservation for the queue head
-- ARGV[1] token    this acquisition's random token (>= 128 bits)
-- ARGV[2] lease    lease in ms (integer > 0)
-- ARGV[3] join     "1": if refused, join the queue (the caller is subscribed); "0": don't
-- ARGV[4] window   ms a reserved queue head has to claim the free lock
-- ARGV[5] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[6] score    optional: the waiter's place in the queue; Redlock sends the same ticket to
--                  every server so that all their queues agree. Default: the server's time (us)
-- Returns {1, fence}  acquired; fence = the new fencing token (strictly increasing per name)
--         {0, pttl}   held by someone else; pttl = ms left on its lease (-1: it has no expiry)
--         {2, ms}     free, but reserved for the queue head for ms more
local lock, fence, queue, handoff = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease, window, channels = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4]), ARGV[5]
local join = ARGV[3] == '1'
local score = tonumber(ARGV[6] or '')

local function refuse(status, ms)
  if join then
    redis.call('ZADD', queue, 'NX', score or now_us(), token)
    -- Live waiters retry at least once per lease; an abandoned queue disappears by itself.
    local keep = 3 * math.max(lease, ms) + 10 * window
    if redis.call('PTTL', queue) < keep then redis.call('PEXPIRE', queue, keep) end
  end
  return {status, ms}
end

-- Nobody queued ahead of us: try the lock itself (the uncontended path: three calls).
local head = redis.call('ZRANGE', queue, 0, 0)[1]
if not head or head == token then
  if not redis.call('SET', lock, token, 'NX', 'PX', lease) then
    return refuse(0, redis.call('PTTL', lock))
  end
  if head then  -- we were the queue head: tell the next one how long we may hold it
    redis.call('ZREM', queue, token)
    redis.call('DEL', handoff)
    local next = redis.call('ZRANGE', queue, 0, 0)[1]
    if next then tell(channels, next, 'T' .. next .. ' ' .. lease) end
  end
  return {1, redis.call('INCR', fence)}
end

-- Another waiter is ahead. Only the queue head may take the free lock; skip a head whose
-- turn ran out.
local pttl = redis.call('PTTL', lock)
if pttl ~= -2 then return refuse(0, pttl) end
local holder, deadline = reservation(handoff)
if holder == head then
  local left = deadline - math.floor(now_us() / 1000)
  if left > 0 then return refuse(2, left) end
  redis.call('ZREM', queue, head)   -- it missed its turn (crashed, or too slow): skip it
  redis.call('DEL', handoff)
  head = redis.call('ZRANGE', queue, 0, 0)[1]
end
if head and head ~= token then
  reserve(queue, handoff, channels, head, window)  -- e.g. the lease ran out, no release
  return refuse(2, window)
end

-- The skipped head was the only one ahead of us (or the queue is now empty).
redis.call('SET', lock, token, 'PX', lease)
if head then
  redis.call('ZREM', queue, token)
  local next = redis.call('ZRANGE', queue, 0, 0)[1]
  if next then tell(channels, next, 'T' .. next .. ' ' .. lease) end
end
return {1, redis.call('INCR', fence)}
