-- inspect.lua: the state of one lock, read atomically.
--
-- KEYS[1] lock   STRING  holder's token
-- KEYS[2] fence  STRING  fencing counter
-- KEYS[3] queue  ZSET    waiters
-- ARGV[1] token  a token to compare with the holder's ("" to compare with none)
-- Returns {pttl, mine, fence, waiters}: pttl = ms left (-2 free, -1 no expiry);
--         mine = 1 if the lock is held with ARGV[1]; fence = last fencing token issued (0: none)
local pttl = redis.call('PTTL', KEYS[1])
local mine = 0
if pttl ~= -2 and ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then mine = 1 end
return {pttl, mine, tonumber(redis.call('GET', KEYS[2]) or '0'), redis.call('ZCARD', KEYS[3])}
