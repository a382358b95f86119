-- claim.lua: a waiter heard that the lock was granted to it: take up its own lease.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] queue    ZSET    waiters, FIFO
-- ARGV[1] token    the grantee's token
-- ARGV[2] lease    its lease in ms (integer > 0); set, not added
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- Returns {1, now} claimed; {0, now} the grant was lost (its short lease ran out first, or it
--         was passed on); now = the server's time in ms
local lock, queue = KEYS[1], KEYS[2]
local token, lease, channels = ARGV[1], ARGV[2], ARGV[3]

if redis.call('GET', lock) ~= token then return {0, now_ms()} end
redis.call('PEXPIRE', lock, lease)
local next = redis.call('ZRANGE', queue, 0, 0)[1]
if next then tell(channels, next, 'T' .. next .. ' ' .. lease) end
return {1, now_ms()}
