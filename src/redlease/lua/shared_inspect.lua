-- shared_inspect.lua: the state of a shared resource, read atomically (nothing is changed).
--
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] token    a token to look for among the holders ("" for none)
-- ARGV[2] capacity units of the resource (as ARGV[7] of shared_acquire.lua)
-- ARGV[3] stored   "1": the capacity is KEYS[6] (ARGV[2] if absent); "0": ARGV[2]
-- Returns {{capacity, used, waiters, fence, mine}, {token, ms, units, payload}, ...}:
--         used = units held by live holders; waiters = queued tokens; fence = last fencing
--         token issued (0: none); mine = ms left on ARGV[1]'s lease (-2: it holds nothing);
--         then one entry per live holder, earliest lease end first (payload "" when none)
--         {-3, i}: KEYS[i] holds data of a kind redlease does not write there (nothing read)
local kinds = {'zset', 'hash', 'zset', 'zset', 'string', 'string', 'hash', 'zset'}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' and kind ~= kinds[i] then return {-3, i} end
end
local S = shared_keys('')
local now = now_ms()
local cap = tonumber(ARGV[2])
if ARGV[3] == '1' then cap = tonumber(redis.call('GET', S.capacity) or ARGV[2]) end
local holders = redis.call('ZRANGEBYSCORE', S.holders, '(' .. now, '+inf', 'WITHSCORES')
local used, mine, rows = 0, -2, {}
for i = 1, #holders, 2 do
  local t, ms = holders[i], tonumber(holders[i + 1]) - now
  local u = units_of(S, t)
  used = used + u
  if t == ARGV[1] then mine = ms end
  rows[#rows + 1] = {t, ms, u, redis.call('HGET', S.payload, t) or ''}
end
local head = {cap, used, redis.call('ZCARD', S.queue), tonumber(redis.call('GET', S.fence) or '0'), mine}
table.insert(rows, 1, head)
return rows
