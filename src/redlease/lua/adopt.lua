-- adopt.lua: take over a detached lease, once: the adopter's token replaces the detached one.
--
-- KEYS[1] lock      STRING  holder's token
-- KEYS[2] fence     STRING  fencing counter: the holder's fence is the last one issued
-- KEYS[3] adopted   STRING  "<detached token> <adopter's token>": the token an adoption spent,
--                           kept as long as the detached lease had left (or the new lease)
-- ARGV[1] detached  the token detach() handed over
-- ARGV[2] token     the adopter's fresh token
-- ARGV[3] lease     the adopter's lease in ms (integer > 0)
-- Returns {1, fence} adopted: the lock holds ARGV[2] for ARGV[3] ms; fence = the holder's
--                    fencing token, read here (never taken from the hand-over token)
--         {2, pttl}  already adopted: an adopter of ARGV[1] still holds the lock, pttl ms
--                    left on its lease; nothing was changed
--         {3, 0}     spent: ARGV[1] was adopted, and that adopter released or lost the lock
--         {0, 0}     not held with ARGV[1]: its lease ran out, or it was taken
-- The swap makes adoption exclusive: once adopted, the detached token no longer matches the
-- lock, so a second adopter of it (a redelivered message) is refused, never let in beside.
local lock, fence, adopted = KEYS[1], KEYS[2], KEYS[3]
local detached, token, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local holder = redis.call('GET', lock)
if holder == detached then
  local left = redis.call('PTTL', lock)
  redis.call('SET', lock, token, 'PX', lease)
  redis.call('SET', adopted, detached .. ' ' .. token, 'PX', math.max(left, lease))
  -- The counter is gone only if evicted: a fresh fence then, above every one issued before.
  local issued = redis.call('GET', fence)
  if not issued then return {1, next_fence(fence)} end
  return {1, tonumber(issued)}
end
local record = redis.call('GET', adopted)
if record and string.sub(record, 1, #detached + 1) == detached .. ' ' then
  if holder and holder == string.sub(record, #detached + 2) then
    return {2, redis.call('PTTL', lock)}
  end
  return {3, 0}
end
return {0, 0}
