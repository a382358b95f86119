-- fence.lua: Redlock's second phase: raise this server's fencing counter to the merged fence.
--
-- A Redlock fence is max(counters of the granting servers); writing it back to a majority
-- before the acquire counts makes every later majority meet a server that has seen it.
-- KEYS[1] lock   STRING  holder's token
-- KEYS[2] fence  STRING  fencing counter (never expires)
-- ARGV[1] token  our token
-- ARGV[2] fence  the merged fencing token
-- Returns 1 if the lock is still ours here (counter raised to at least ARGV[2]), else 0
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
