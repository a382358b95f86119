-- ratelimit_fixed.lua: fixed windows, one per limit; a hit is counted by all or by none.
--
-- KEYS[i]  counter  STRING  units used in limit i's current window; PX = time left in it
-- ARGV[1]  cost     units this hit takes (integer, 1 <= cost <= every limit)
-- ARGV[2]  consume  "1": hit (count it if every limit allows it); "0": peek (never writes)
--          (ARGV[1], ARGV[2] and the clock are read by ratelimit_lib.lua, the prelude)
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]  limit i: units per window, window ms (the window starts
--          at the subject's first hit), and an unused slot (the burst of token_bucket)
-- Returns {server time us, then per limit: allowed (1/0), remaining, retry_after us,
--          reset_after us}; a limit's "allowed" says whether it alone would pass the hit.
-- A refused hit is counted by no limit. A counter found without expiry (written by other code,
-- or a non-atomic INCR whose EXPIRE was lost) gets one now, so it cannot refuse forever.

local used, left, pass = {}, {}, true
for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local u = tonumber(redis.call('GET', key) or '0')
  local l = redis.call('PTTL', key)  -- ms; -2 no counter, -1 a counter without expiry
  if l == -1 and consume then
    redis.call('PEXPIRE', key, window)
    l = window
  end
  if l < 0 then l = (u > 0) and window or 0 end
  used[i], left[i] = u, l
  if u + cost > limit then pass = false end
end

for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local u, l = used[i], left[i]
  if u + cost > limit then  -- refused by this limit: its window ends in `l`
    answer(0, math.max(limit - u, 0), l * 1000, l * 1000)
  else
    if pass and consume then
      u = redis.call('INCRBY', key, cost)
      if u == cost then  -- the first hit of a window starts it
        redis.call('PEXPIRE', key, window)
        l = window
      end
    end
    answer(1, limit - u, 0, l * 1000)
  end
end
return reply
