-- redispy_inspect.lua: read a lock in redis-py's layout (read-only).
--
-- KEYS[1] name   STRING  holder's token
-- ARGV[1] token  our token ('' for none)
-- Returns {held, mine, pttl}: held 1 if anyone holds it; mine 1 if with ARGV[1]; pttl the
-- lease left in ms (-1: no expiry; -2: free)
local holder = redis.call('GET', KEYS[1])
if not holder then return {0, 0, -2} end
local mine = 0
if holder == ARGV[1] then mine = 1 end
return {1, mine, redis.call('PTTL', KEYS[1])}
