-- ratelimit_gcra.lua: GCRA (generic cell rate algorithm), timed by the server's clock.
--
-- KEYS[1] tat      STRING  theoretical arrival time: server us (decimal) at which the subject
--                          is fully reset; PX = until then
-- ARGV[1] limit    burst, and units per window (integer >= 1)
-- ARGV[2] window   ms (integer >= 1); one unit comes back every window / limit
-- ARGV[3] cost     units this hit takes (integer, 1 <= cost <= limit)
-- ARGV[4] consume  "1": hit (record it if allowed); "0": peek (never writes)
-- Returns {allowed (1/0), remaining, retry_after us, reset_after us}
-- A hit of cost c passes when tat + c * interval - now <= window (interval = window / limit);
-- a passed hit moves tat there. A refused hit changes nothing.
local key = KEYS[1]
local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]) * 1000, tonumber(ARGV[3])
local consume = ARGV[4] == '1'
local interval = window / limit  -- us per unit
local SLACK = 1  -- us: absorbs floating-point rounding at an exact boundary

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = math.max(tonumber(redis.call('GET', key) or '0') or 0, now)

-- Units that could pass at `at` (the tat before or after this hit).
local function remaining(at)
  return math.floor((window - (at - now) + SLACK) / interval)
end

local after = tat + cost * interval
if after - now > window + SLACK then  -- refused: it passes once tat has drained enough
  return {0, remaining(tat), math.ceil(after - window - now), math.ceil(tat - now)}
end
if not consume then
  return {1, remaining(tat), 0, math.ceil(tat - now)}
end
local ttl_ms = math.max(1, math.ceil((after - now) / 1000))
redis.call('SET', key, string.format('%.17g', after), 'PX', ttl_ms)  -- %.17g: exact
return {1, remaining(after), 0, math.ceil(after - now)}
