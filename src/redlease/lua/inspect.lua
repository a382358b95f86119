-- inspect.lua: the state of one lock, read atomically, refusing keys redlease did not write.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] fence    STRING  fencing counter
-- KEYS[3] queue    ZSET    waiters
-- KEYS[4] handoff  STRING  reservation for the queue head (optional: only its type is checked)
-- ARGV[1] token    a token to compare with the holder's ("" to compare with none)
-- Returns {pttl, mine, fence, waiters, holder}: pttl = ms left (-2 free, -1 no expiry);
--         mine = 1 if the lock is held with ARGV[1]; fence = last fencing token issued (0: none);
--         holder = the holder's token ("" when free): it says who holds it (_core/holder.py)
--         {-3, i}: KEYS[i] holds data of a kind redlease does not write there (nothing read)
local kinds = {'string', 'string', 'zset', 'string'}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' and kind ~= kinds[i] then return {-3, i} end
end
local counter = redis.call('GET', KEYS[2])
if counter and not string.match(counter, '^%d+$') then return {-3, 2} end
local pttl = redis.call('PTTL', KEYS[1])
local holder = ''
if pttl ~= -2 then holder = redis.call('GET', KEYS[1]) end
local mine = 0
if ARGV[1] ~= '' and holder == ARGV[1] then mine = 1 end
return {pttl, mine, tonumber(counter or '0'), redis.call('ZCARD', KEYS[3]), holder}
