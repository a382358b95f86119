-- release.lua: compare-token-and-delete, then hand the lock to the queue head.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] queue    ZSET    waiters, FIFO
-- KEYS[3] handoff  STRING  reservation for the queue head
-- ARGV[1] token    the releasing acquisition's token
-- ARGV[2] window   ms the queue head has to claim the lock
-- ARGV[3] channel  the lock's pub/sub channel
-- ARGV[4] quiet    optional "1": an undo (Redlock's partial grant, a lost reply) that never
--                  held the lock for real: hand it on to a queued waiter, but announce nothing
--                  when none is queued (that would only wake the undoer itself)
-- Returns 1 released; 0 not held with this token (nothing was changed)
local lock, queue, handoff = KEYS[1], KEYS[2], KEYS[3]
local token, window, channel = ARGV[1], tonumber(ARGV[2]), ARGV[3]

-- The one safety-critical line: never delete a lock whose token is not ours.
if redis.call('GET', lock) ~= token then return 0 end
redis.call('DEL', lock)
if ARGV[4] == '1' and redis.call('EXISTS', queue) == 0 then return 1 end
hand_off(queue, handoff, channel, window)
return 1
