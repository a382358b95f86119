-- shared_acquire.lua: take `want` units of a shared resource, in FIFO order (shared_lib.lua).
--
-- KEYS[1] holders  ZSET    holder token -> lease end (server ms)
-- KEYS[2] units    HASH    token -> units held or asked (absent: 1)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] granted  ZSET    reserved waiters -> deadline (server ms)
-- KEYS[5] fence    STRING  fencing counter (never expires)
-- KEYS[6] capacity STRING  stored capacity (read only when ARGV[8] is "1")
-- KEYS[7] payload  HASH    holder token -> "<fence> <value>"
-- KEYS[8] watchers ZSET    tokens told when the holders change
-- ARGV[1] token    this acquisition's random token
-- ARGV[2] lease    lease in ms (integer > 0)
-- ARGV[3] want     units asked for (integer > 0)
-- ARGV[4] join     "1": if refused, join the queue (the caller is subscribed); "0": don't
-- ARGV[5] window   ms a reserved waiter has to take its units
-- ARGV[6] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[7] capacity units of the resource (used as is, or stored first when ARGV[8] is "1")
-- ARGV[8] stored   "1": the capacity is KEYS[6] (set from ARGV[7] if absent); "0": ARGV[7]
-- ARGV[9] over     a token whose live holding admits us whatever the capacity ("" for none):
--                  the write holder of a ReadWriteLock taking a read share
-- ARGV[10] value   optional: stored in payload for this holder (Election: the leader's value)
-- Returns {1, fence}  acquired; fence strictly increases over the grants of this resource
--         {0, ms}     refused: the first lease ends in ms (-1: nothing to wait for but a release)
--         {2, ms}     refused, and first in line after the reserved waiters: a reservation
--                     ahead lapses in ms (check then that it was taken)
--         When ARGV[8] is "1", each reply ends with the stored capacity ({1, fence, cap}...):
--         the caller tells when it differs from the capacity it asked for.
local S = shared_keys(ARGV[6])
local token, lease, want = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local join, window = ARGV[4] == '1', tonumber(ARGV[5])
local over, value = ARGV[9], ARGV[10]
local now = now_ms()
purge(S, now)
local stored = ARGV[8] == '1'
local cap = capacity(S, tonumber(ARGV[7]), stored)

-- The reply, with the stored capacity last when it is stored.
local function reply(r)
  if stored then r[#r + 1] = cap end
  return r
end

if over ~= '' then
  local score = redis.call('ZSCORE', S.holders, over)
  if score and tonumber(score) > now then
    return reply({1, grant_units(S, token, want, lease, now, value)})
  end
end

local queued = redis.call('ZSCORE', S.queue, token)
if queued and want ~= 1 then redis.call('HSET', S.units, token, want) end
local mine, used, whole, blocked = walk(S, cap, now, window, queued and token or nil)
if mine or (not queued and whole and used + want <= cap) then
  return reply({1, grant_units(S, token, want, lease, now, value)})
end
if join and not queued then
  redis.call('ZADD', S.queue, now_us(), token)
  if want ~= 1 then redis.call('HSET', S.units, token, want) end
  -- Live waiters retry at least once per lease; an abandoned queue disappears by itself.
  local ms = 3 * lease + 10 * window
  keep(S.queue, ms)
  keep(S.granted, ms)
end
-- We check on the reserved waiters if we are the first that does not fit (or would be, last).
return reply(refusal(S, now, blocked == token or (whole and not queued)))
