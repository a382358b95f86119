-- ratelimit_reset.lua: forget a subject's hits (either algorithm).
--
-- KEYS[1] the subject's key (counter or tat)
-- Returns 1 if the subject had a trace, 0 if not
return redis.call('DEL', KEYS[1])
