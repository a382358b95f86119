-- redispy_release.lua: compare-and-delete on the lock's name, as redis-py's Lock releases.
--
-- KEYS[1] name   STRING  holder's token
-- ARGV[1] token  our token
-- Returns 1 released; 0 not held with this token (nothing was changed)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
