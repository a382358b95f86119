-- shared_force_release.lua: break-glass: remove holders of a shared resource (a Semaphore's
-- permits, a ReadWriteLock's holds, an Election's term), move the fence on, and reserve the
-- freed units for the waiters that now fit, as a release does.
--
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] token    "": every live holder; else only the holders whose token starts with
--                  this (inspect() shows a token's start, never all of it)
-- ARGV[2] window   ms a reserved waiter has to take its units
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[4] capacity units of the resource (as ARGV[7] of shared_acquire.lua)
-- ARGV[5] stored   "1": the capacity is KEYS[6]; "0": ARGV[4]
-- Returns {fence, token, ...}: the fencing counter after the move (every removed holder's
--         fence is below it) and the tokens removed (none: nothing held matched; nothing
--         changed). Each evicted holder finds out at its next renewal (on_lost).
local S = shared_keys(ARGV[3])
local now = now_ms()
local removed = {}
for _, t in ipairs(redis.call('ZRANGEBYSCORE', S.holders, '(' .. now, '+inf')) do
  if ARGV[1] == '' or string.sub(t, 1, #ARGV[1]) == ARGV[1] then
    redis.call('ZREM', S.holders, t)
    forget(S, t)
    removed[#removed + 1] = t
  end
end
if #removed == 0 then return {tonumber(redis.call('GET', S.fence) or '0')} end
local moved = next_fence(S.fence)
notify(S)
purge(S, now)
walk(S, capacity(S, tonumber(ARGV[4]), ARGV[5] == '1'), now, tonumber(ARGV[2]), nil)
table.insert(removed, 1, moved)
return removed
