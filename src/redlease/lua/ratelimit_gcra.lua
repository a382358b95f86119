-- ratelimit_gcra.lua: GCRA (generic cell rate algorithm) for N limits, on the server's clock.
--
-- KEYS[i]  tat      STRING  limit i's theoretical arrival time: server us (decimal) at which
--                           the subject is fully reset; PX = until then
-- ARGV[1]  cost     units this hit takes (integer, 1 <= cost <= every limit)
-- ARGV[2]  consume  "1": hit (record it if every limit allows it); "0": peek (never writes)
--          (ARGV[1], ARGV[2] and the clock are read by ratelimit_lib.lua, the prelude)
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]  limit i: burst and units per window, window ms (one
--          unit comes back every window / limit), and an unused slot
-- Returns {server time us, then per limit: allowed (1/0), remaining, retry_after us,
--          reset_after us}; a limit's "allowed" says whether it alone would pass the hit.
-- A hit of cost c passes limit i when tat + c * interval - now <= window (interval = window /
-- limit); a hit every limit passes moves each tat there. A refused hit changes nothing.
local SLACK = 1  -- us: absorbs floating-point rounding at an exact boundary

local tats, pass = {}, true
for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]) * 1000
  tats[i] = math.max(tonumber(redis.call('GET', key) or '0') or 0, now)
  if tats[i] + cost * window / limit - now > window + SLACK then pass = false end
end

for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]) * 1000
  local interval = window / limit  -- us per unit
  local tat = tats[i]
  -- Units that could pass at `at` (the tat before or after this hit).
  local function remaining(at)
    return math.floor((window - (at - now) + SLACK) / interval)
  end
  local after = tat + cost * interval
  if after - now > window + SLACK then  -- refused: it passes once tat has drained enough
    answer(0, remaining(tat), math.ceil(after - window - now), math.ceil(tat - now))
  elseif not (pass and consume) then
    answer(1, remaining(tat), 0, math.ceil(tat - now))
  else
    local ttl_ms = math.max(1, math.ceil((after - now) / 1000))
    redis.call('SET', key, string.format('%.17g', after), 'PX', ttl_ms)  -- %.17g: exact
    answer(1, remaining(after), 0, math.ceil(after - now))
  end
end
return reply
