-- ratelimit_reserve_token_bucket.lua: reserve a waiter's instant under one token bucket.
--
-- KEYS[1]  bucket   HASH  as ratelimit_token_bucket.lua keeps it: "tokens" (decimal) as of
--                         "at" (server us); PX = until it is full again. Reservations take
--                         tokens before they are refilled: "tokens" is then below 0
-- ARGV[1]  cost     tokens the waiter takes (integer, 1 <= cost <= burst)
-- ARGV[2]  limit    tokens refilled per window
-- ARGV[3]  window   ms
-- ARGV[4]  burst    the bucket's size (a new or expired bucket is full)
-- ARGV[5]  bound    us the waiter may sleep at most; "-1": no bound
-- Returns {server time us, reserved (1/0), wait us, stamp, remaining, reset_after us}.
-- Reserved: the bucket loses `cost` tokens now and the waiter passes once it is back to 0,
-- `wait` from now (0: at once, as a hit); `stamp` is "<tokens> <at>" as written (exact text,
-- compared by ratelimit_unreserve.lua); remaining and reset_after are as of the waiter's
-- instant. Not reserved (its wait would pass `bound`): nothing is written, `wait` is what it
-- would have been, stamp "". A hit sees the debt and waits behind the reservations: FIFO.
local SLACK = 1e-9  -- tokens, as ratelimit_token_bucket.lua: the same boundary as a hit
local cost, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local window, burst, bound = tonumber(ARGV[3]) * 1000, tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_us()
local per_us = limit / window  -- tokens refilled per us
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(stored[1]), tonumber(stored[2])
if tokens == nil or at == nil then
  tokens = burst
else  -- refill since `at` (never back: a clock that went back refills nothing)
  tokens = math.min(burst, tokens + math.max(now - at, 0) * per_us)
end
local after = tokens - cost
local wait = 0
if after + SLACK < 0 then wait = math.ceil(-after / per_us) end
if bound >= 0 and wait > bound then
  return {now, 0, wait, '', 0, math.ceil((burst - tokens) / per_us)}
end
if after < 0 and wait == 0 then after = 0 end
local stamp = string.format('%.17g', after) .. ' ' .. string.format('%.17g', now)
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', after), 'at',
  string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((burst - after) / per_us / 1000)))
local level = math.max(after, 0)  -- at the waiter's instant
return {now, 1, wait, stamp, math.floor(level + SLACK), math.ceil((burst - level) / per_us)}
