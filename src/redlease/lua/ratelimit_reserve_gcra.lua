-- ratelimit_reserve_gcra.lua: reserve a waiter's instant under one GCRA limit (acquire).
--
-- KEYS[1]  tat      STRING  the theoretical arrival time, as ratelimit_gcra.lua keeps it:
--                           server us (decimal) at which the subject is fully reset; PX = until
-- ARGV[1]  cost     units the waiter takes (integer, 1 <= cost <= limit)
-- ARGV[2]  limit    units per window (also the burst); one unit comes back every window / limit
-- ARGV[3]  window   ms
-- ARGV[4]  burst    unused here (ratelimit_reserve_token_bucket.lua's bucket size)
-- ARGV[5]  bound    us the waiter may sleep at most; "-1": no bound
-- Returns {server time us, reserved (1/0), wait us, stamp, remaining, reset_after us}.
-- Reserved: tat moves to max(tat, now) + cost * interval and the waiter passes once
-- tat - window is reached, `wait` from now (0: at once, as a hit); `stamp` is the tat written
-- (exact text, compared by ratelimit_unreserve.lua); remaining and reset_after are as of the
-- waiter's instant. Not reserved (its wait would pass `bound`): nothing is written, `wait` is
-- what it would have been, stamp "". Each reservation starts where the last one ended: FIFO.
local SLACK = 1  -- us, as ratelimit_gcra.lua: the same boundary as a hit
local cost, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local window, bound = tonumber(ARGV[3]) * 1000, tonumber(ARGV[5])
local now = now_us()
local interval = window / limit
local after = math.max(tonumber(redis.call('GET', KEYS[1]) or '0') or 0, now) + cost * interval
local wait = after - window - now
if wait <= SLACK then wait = 0 end
wait = math.ceil(wait)
if bound >= 0 and wait > bound then
  return {now, 0, wait, '', 0, math.ceil(after - cost * interval - now)}
end
local stamp = string.format('%.17g', after)  -- %.17g: exact
redis.call('SET', KEYS[1], stamp, 'PX', math.max(1, math.ceil((after - now) / 1000)))
local at = now + wait
return {now, 1, wait, stamp, math.floor((window - (after - at) + SLACK) / interval),
  math.ceil(after - at)}
