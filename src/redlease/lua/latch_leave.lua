-- latch_leave.lua: a waiter gives up (timeout, cancellation): leave the waiters' set.
--
-- KEYS[1] waiters  ZSET  waiting tokens
-- ARGV[1] token    the waiter's token
-- Returns 1 if it was waiting, 0 if not
return redis.call('ZREM', KEYS[1], ARGV[1])
