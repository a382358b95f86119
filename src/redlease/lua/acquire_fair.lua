-- acquire_fair.lua: take the lock if it is free and no other waiter is ahead in the queue;
-- a fair Lock's (a release grants the lock to the queue head: lock_lib.lua's mode G).
--
-- KEYS[1..4] lock, fence, queue, handoff; ARGV[1..5] token, lease, join, window, channels:
--          as acquire_lib.lua gives them
-- Returns {1, fence}       acquired; fence = the new fencing token (strictly increasing per name,
--                          at least the server's time in us: common_lib.lua's next_fence)
--         {0, pttl, now}  held by someone else (or, when free, granted to a waiter ahead:
--                          pttl = the window); pttl = ms left on its lease (-1: no expiry)
--         now = the server's time in ms
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
