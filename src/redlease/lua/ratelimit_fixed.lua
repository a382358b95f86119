-- ratelimit_fixed.lua: fixed window; INCRBY and PEXPIRE on the first hit, as one step.
--
-- KEYS[1] counter  STRING  units used in the current window; PX = time left in the window
-- ARGV[1] limit    units per window (integer >= 1)
-- ARGV[2] window   ms (integer >= 1); the window starts at the subject's first hit
-- ARGV[3] cost     units this hit takes (integer, 1 <= cost <= limit)
-- ARGV[4] consume  "1": hit (count it if allowed); "0": peek (never writes)
-- Returns {allowed (1/0), remaining, retry_after us, reset_after us}
-- A refused hit is not counted. A counter found without expiry (written by other code, or a
-- non-atomic INCR whose EXPIRE was lost) gets one now, so it cannot refuse forever.
local key = KEYS[1]
local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local consume = ARGV[4] == '1'

local used = tonumber(redis.call('GET', key) or '0')
local left = redis.call('PTTL', key)  -- ms; -2 no counter, -1 a counter without expiry
if left == -1 and consume then
  redis.call('PEXPIRE', key, window)
  left = window
end
if left < 0 then left = (used > 0) and window or 0 end

if used + cost > limit then  -- refused, not counted: the window ends in `left`
  return {0, math.max(limit - used, 0), left * 1000, left * 1000}
end
if not consume then
  return {1, limit - used, 0, left * 1000}
end
used = redis.call('INCRBY', key, cost)
if used == cost then  -- the first hit of a window starts it
  redis.call('PEXPIRE', key, window)
  left = window
end
return {1, limit - used, 0, left * 1000}
