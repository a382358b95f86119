-- extend.lua: compare-token-and-pexpire: set the remaining lease of a lock we hold.
--
-- KEYS[1] lock   STRING  holder's token
-- ARGV[1] token  our token
-- ARGV[2] lease  new remaining lease in ms (integer > 0); it is set, not added
-- Returns 1 extended; 0 not held with this token (nothing was changed)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
