-- ratelimit_token_bucket.lua: token buckets for N limits, refilled on the server's clock.
--
-- KEYS[i]  bucket   HASH  limit i's bucket: "tokens" (decimal) as of "at" (server us);
--                         PX = until it is full again
-- ARGV[1]  cost     tokens this hit takes (integer, 1 <= cost <= every burst)
-- ARGV[2]  consume  "1": hit (take them if every bucket has enough); "0": peek (never writes)
--          (ARGV[1], ARGV[2] and the clock are read by ratelimit_lib.lua, the prelude)
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]  limit i: tokens refilled per window, window ms, and the
--          burst (the bucket's size; a new or expired bucket is full)
-- Returns {server time us, then per limit: allowed (1/0), remaining, retry_after us,
--          reset_after us}; a limit's "allowed" says whether it alone would pass the hit.
-- A hit passes when every bucket holds `cost` tokens; then each loses them. A refused hit
-- takes nothing.
local SLACK = 1e-9  -- tokens: absorbs floating-point rounding at an exact refill

local levels, pass = {}, true
for i, key in ipairs(KEYS) do
  local limit, window, burst = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]) * 1000,
    tonumber(ARGV[3 * i + 2])
  local stored = redis.call('HMGET', key, 'tokens', 'at')
  local tokens, at = tonumber(stored[1]), tonumber(stored[2])
  if tokens == nil or at == nil then
    tokens = burst
  else  -- refill since `at` (never back: a clock that went back refills nothing)
    tokens = math.min(burst, tokens + math.max(now - at, 0) * limit / window)
  end
  levels[i] = tokens
  if tokens + SLACK < cost then pass = false end
end

for i, key in ipairs(KEYS) do
  local limit, window, burst = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]) * 1000,
    tonumber(ARGV[3 * i + 2])
  local per_us = limit / window  -- tokens refilled per us
  local tokens = levels[i]
  if tokens + SLACK < cost then  -- refused: it passes once `cost` tokens are back
    answer(0, math.floor(tokens + SLACK), math.ceil((cost - tokens) / per_us),
      math.ceil((burst - tokens) / per_us))
  else
    if pass and consume then
      tokens = math.max(tokens - cost, 0)
      local full_us = (burst - tokens) / per_us
      redis.call('HSET', key, 'tokens', string.format('%.17g', tokens), 'at',
        string.format('%.17g', now))
      redis.call('PEXPIRE', key, math.max(1, math.ceil(full_us / 1000)))
    end
    answer(1, math.floor(tokens + SLACK), 0, math.ceil((burst - tokens) / per_us))
  end
end
return reply
