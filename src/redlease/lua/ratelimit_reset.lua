-- ratelimit_reset.lua: forget a subject's hits (any algorithm, every limit).
--
-- KEYS[i] the subject's key for limit i (counter, tat, bucket or counts)
-- Returns 1 if the subject had a trace, 0 if not
if redis.call('DEL', unpack(KEYS)) > 0 then return 1 end
return 0
