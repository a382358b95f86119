-- release.lua: compare-token-and-delete, then hand the lock to the queue head.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] queue    ZSET    waiters, FIFO
-- KEYS[3] handoff  STRING  reservation for the queue head
-- ARGV[1] token    the releasing acquisition's token
-- ARGV[2] window   ms the queue head has to claim the lock
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- Returns 1 released; 0 not held with this token (nothing was changed)
local lock, queue, handoff = KEYS[1], KEYS[2], KEYS[3]
local token, window, channels = ARGV[1], tonumber(ARGV[2]), ARGV[3]

-- The one safety-critical line: never delete a lock whose token is not ours.
if redis.call('GET', lock) ~= token then return 0 end
redis.call('DEL', lock)
hand_off(queue, handoff, channels, window)
return 1
