-- ratelimit_unreserve.lua: give back a reservation of ratelimit_reserve_*.lua (a waiter that
-- was cancelled or interrupted while it slept).
--
-- KEYS[1]  the limit's key: a GCRA tat (STRING) or a token bucket (HASH)
-- ARGV[1]  stamp    what the reservation wrote (its reply's stamp)
-- ARGV[2]  cost     units it took
-- ARGV[3]  limit    units per window
-- ARGV[4]  window   ms
-- ARGV[5]  burst    the bucket's size (token bucket only)
-- Returns 1 if given back, 0 if not: the key no longer holds the stamp (a later reservation
-- or hit was counted on top of it, or it expired). Then the slot stays spent: a later
-- waiter's instant cannot move, so giving it back would let a hit overtake the queue.
-- Given back: a tat moves back by cost * interval, a bucket gets its cost back; the key is
-- deleted when that leaves no trace.
local stamp, cost, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local window, burst = tonumber(ARGV[4]) * 1000, tonumber(ARGV[5])
local now = now_us()
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  if redis.call('GET', KEYS[1]) ~= stamp then return 0 end
  local tat = tonumber(stamp) - cost * window / limit
  if tat <= now then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', math.ceil((tat - now) / 1000))
  end
  return 1
elseif kind == 'hash' then
  local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
  if (stored[1] or '') .. ' ' .. (stored[2] or '') ~= stamp then return 0 end
  local per_us = limit / window
  local tokens = tonumber(stored[1]) + cost
  local full_us = (burst - math.min(burst, tokens + math.max(now - tonumber(stored[2]), 0) * per_us))
    / per_us
  if full_us <= 0 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens))
    redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(full_us / 1000)))
  end
  return 1
end
return 0
