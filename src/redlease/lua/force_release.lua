-- force_release.lua: break-glass: remove whoever holds the lock, move the fence on, and grant
-- the lock to the queue head as a release does (an operator's redlease release --force).
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] fence    STRING  fencing counter (moved on with next_fence, as an acquisition does)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] handoff  STRING  reservation (mode R) or head since (mode B): dropped with the holder
-- ARGV[1] window   ms the queue head has to claim the lock it is granted
-- ARGV[2] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[3] token    "": whoever holds it; else only a holding whose token starts with this
--                  (inspect() shows a token's start, never all of it)
-- Returns {token, fence}: the token removed ("" when nothing was: the lock was free, or held
--         with another token than ARGV[3]; nothing was changed) and the fencing counter after
--         the move: every fence the removed holder had is below it. The evicted holder finds
--         out at its next renewal (on_lost); its fenced writes are refused once the next
--         holder (granted here, with a fence above the counter's) has written.
local lock, fence, queue, handoff = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local holder = redis.call('GET', lock)
if not holder or (ARGV[3] ~= '' and string.sub(holder, 1, #ARGV[3]) ~= ARGV[3]) then
  return {'', tonumber(redis.call('GET', fence) or '0')}
end
redis.call('DEL', lock, handoff)
local moved = next_fence(fence)
-- Granted as a fair release grants: a barging waiter takes a grant too (barge() grants).
grant_lock(lock, fence, queue, ARGV[2], tonumber(ARGV[1]), nil)
return {holder, moved}
