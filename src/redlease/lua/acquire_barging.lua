-- acquire_barging.lua: take the lock if it is free, whoever waits; Lock(fair=False)'s (a
-- release frees the lock and wakes the queue head: lock_lib.lua's mode B).
--
-- KEYS[1..4] lock, fence, queue, handoff; ARGV[1..5] token, lease, join, window, channels:
--          as acquire_lib.lua gives them
-- Returns {1, fence}       acquired; fence = the new fencing token (strictly increasing per name,
--                          at least the server's time in us: common_lib.lua's next_fence)
--         {0, pttl, now}  held by someone else; pttl = ms left on its lease (-1: no expiry)
--         now = the server's time in ms
if not redis.call('SET', lock, token, 'NX', 'PX', lease) then return held() end
if redis.call('ZREM', queue, token) == 1 then
  local since = redis.call('GET', handoff)
  if since and string.sub(since, 1, #token + 1) == token .. ' ' then
    redis.call('DEL', handoff)
  end
end
return {1, next_fence(fence)}
