-- acquire_lib.lua: what the three acquire scripts share, after common_lib.lua and lock_lib.lua.
-- Provides: the caller's KEYS and ARGV[1..5] by name (lock, fence, queue, handoff; token,
-- lease, join, window, channels), score and told (set by a script that takes them), refuse,
-- took, held. Loaded by: _core/lock.py (acquire_fair, acquire_barging, acquire_reserving).
--
-- KEYS[1] lock     STRING  holder's token, PX lease
-- KEYS[2] fence    STRING  fencing counter (never expires)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] handoff  STRING  reservation for the queue head (reserving); head since (barging)
-- ARGV[1] token    this acquisition's random token (>= 128 bits)
-- ARGV[2] lease    lease in ms (integer > 0)
-- ARGV[3] join     "1": if refused, join the queue (the caller is subscribed); "0": don't
-- ARGV[4] window   ms a reserved queue head has to take the free lock (reserving), or a
--                  granted one to claim it (fair, barging)
-- ARGV[5] channels prefix of the waiters' channels (a process id completes it)
local lock, fence, queue, handoff = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease, window, channels = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4]), ARGV[5]
local join = ARGV[3] == '1'
local score = nil  -- the waiter's place in the queue (nil: the server's time)
local told = channels  -- where the T message goes (false: nowhere)

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
