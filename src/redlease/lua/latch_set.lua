-- latch_set.lua: start counting from n, only if the latch is not counting already.
--
-- KEYS[1] count       STRING  the count left (absent: not counting)
-- KEYS[2] generation  STRING  rounds completed (INCR'd each time the count reaches 0)
-- ARGV[1] n           the count (integer > 0)
-- Returns 1 if set, 0 if the latch was counting (nothing changed)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
