-- claim.lua: a waiter heard that the lock was granted to it: take up its own lease.
--
-- KEYS[1] lock     STRING  holder's token
-- ARGV[1] token    the grantee's token
-- ARGV[2] lease    its lease in ms (integer > 0); set, not added
-- Returns {1, now} claimed; {0, now} the grant was lost (its short lease ran out first, or it
--         was passed on); now = the server's time in ms
-- The next waiter is not told (no T message): it was told when to check (N), and a check
-- while the lock is held tells it the lease left. Under contention it is granted the lock
-- before then, so the hand-off costs no message to it but that N.
local lock, token, lease = KEYS[1], ARGV[1], ARGV[2]

if redis.call('GET', lock) ~= token then return {0, now_ms()} end
redis.call('PEXPIRE', lock, lease)
return {1, now_ms()}
