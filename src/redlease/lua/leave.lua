-- leave.lua: a waiter gives up (timeout, cancellation): leave the queue, pass on its turn.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] queue    ZSET    waiters, FIFO
-- KEYS[3] handoff  STRING  reservation for the queue head
-- ARGV[1] token    the waiter's token
-- ARGV[2] window   ms the next queue head has to claim the lock
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- Returns 1 if the waiter was queued, 0 if not
local lock, queue, handoff = KEYS[1], KEYS[2], KEYS[3]
local token, window, channels = ARGV[1], tonumber(ARGV[2]), ARGV[3]

local removed = redis.call('ZREM', queue, token)
local holder = reservation(handoff)
if holder == token then
  redis.call('DEL', handoff)
  if redis.call('EXISTS', lock) == 0 then hand_off(queue, handoff, channels, window) end
end
return removed
