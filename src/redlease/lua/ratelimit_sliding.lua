-- ratelimit_sliding.lua: sliding windows (the two-window estimate) for N limits.
--
-- KEYS[i]  counts   HASH  limit i's "w" (the current window's number: server time / window),
--                         "c" (units passed in it) and "p" (units passed in window w - 1);
--                         PX = until window w + 1 ends (then neither count matters)
-- ARGV[1]  cost     units this hit takes (integer, 1 <= cost <= every limit)
-- ARGV[2]  consume  "1": hit (count it if every limit allows it); "0": peek (never writes)
--          (ARGV[1], ARGV[2] and the clock are read by ratelimit_lib.lua, the prelude)
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]  limit i: units per window, window ms, and an unused slot
-- Returns {server time us, then per limit: allowed (1/0), remaining, retry_after us,
--          reset_after us}; a limit's "allowed" says whether it alone would pass the hit.
-- Windows are aligned on the server's clock. At a fraction f of window w, the units that
-- passed in the last `window` are estimated as p * (1 - f) + c (the previous window's hits
-- taken as evenly spread); a hit of cost k passes when that plus k is at most the limit.
-- A refused hit is counted by no limit.
local SLACK = 1e-9  -- units: absorbs floating-point rounding at an exact boundary

local states, pass = {}, true
for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]) * 1000
  local w = math.floor(now / window)
  local stored = redis.call('HMGET', key, 'w', 'c', 'p')
  local sw, c, p = tonumber(stored[1]), tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
  if sw == nil or sw < w - 1 then
    c, p = 0, 0
  elseif sw == w - 1 then
    c, p = 0, c
  elseif sw > w then  -- the clock went back: keep counting in the stored window
    w = sw
  end
  local f = math.min(math.max((now - w * window) / window, 0), 1)
  local estimate = p * (1 - f) + c
  states[i] = {w, c, p, f, estimate}
  if estimate + cost > limit + SLACK then pass = false end
end

for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]) * 1000
  local w, c, p, f, estimate = unpack(states[i])
  local start = w * window
  if estimate + cost > limit + SLACK then
    -- Refused: it passes once the previous window's weight has fallen enough, in this
    -- window if the current count leaves room, else in the next (where c becomes p).
    local at
    if c + cost <= limit then
      at = start + window * (1 - (limit - c - cost) / p)
    else
      at = start + window + window * math.max(0, 1 - (limit - cost) / c)
    end
    local reset = (c > 0) and (start + 2 * window) or (start + window)
    answer(0, math.max(math.floor(limit - estimate + SLACK), 0), math.max(1, math.ceil(at - now)),
      math.ceil(reset - now))
  else
    if pass and consume then
      c = c + cost
      estimate = estimate + cost
      redis.call('HSET', key, 'w', w, 'c', c, 'p', p)
      redis.call('PEXPIRE', key, math.max(1, math.ceil((start + 2 * window - now) / 1000)))
    end
    local reset = 0
    if c > 0 then reset = start + 2 * window - now elseif p > 0 then reset = start + window - now end
    answer(1, math.max(math.floor(limit - estimate + SLACK), 0), 0, math.ceil(reset))
  end
end
return reply
