-- leave.lua: a waiter gives up (timeout, cancellation): leave the queue, pass on its turn.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] fence    STRING  fencing counter (modes G and B)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] handoff  STRING  reservation for the queue head (mode R); head since (mode B)
-- ARGV[1] token    the waiter's token
-- ARGV[2] window   ms the next queue head has to take or claim the lock
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[4] mode     optional: "G", "B" or "R" (default), as release.lua
-- ARGV[5] barge    mode B: as release.lua
-- ARGV[6] tell     optional, mode R: "0" reserves the lock without telling anyone (Redlock tells
--                  the waiter from a few of its servers only: one message wakes it)
-- ARGV[7] rotation optional, mode B: ms the queued waiters share: a new head's turn is this
--                  divided by their number, at least 1 ms and at most ARGV[5] (default: ARGV[5])
-- Returns 1 if the waiter was queued (or had been granted the lock), 0 if not
local lock, fence, queue, handoff = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, window, channels = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if ARGV[6] == '0' then channels = false end
local mode, barge_ms = ARGV[4] or 'R', tonumber(ARGV[5] or '0')
local rotation_ms = tonumber(ARGV[7] or '0')

local removed = redis.call('ZREM', queue, token)
if mode ~= 'R' then
  if redis.call('GET', lock) == token then  -- granted before it gave up: pass it on
    redis.call('DEL', lock)
    pass_on(lock, fence, queue, handoff, channels, window, mode, barge_ms, rotation_ms)
    return 1
  end
  if mode == 'B' and removed == 1 and redis.call('EXISTS', lock) == 0 then
    barge(lock, fence, queue, handoff, channels, window, barge_ms, rotation_ms)  -- wake the next
  end
  return removed
end
local holder, deadline = reservation(handoff)
if holder == token then
  redis.call('DEL', handoff)
  if redis.call('EXISTS', lock) == 0 then hand_off(queue, handoff, channels, window) end
elseif removed == 1 and holder then
  -- The waiter that checks on the reserved head may have left: tell whoever is next now.
  local second = redis.call('ZRANGE', queue, 1, 1)[1]
  local left = deadline - now_ms()
  if second and left > 0 then tell(channels, second, 'N', left) end
end
return removed
