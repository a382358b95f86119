-- semaphore_set_permits.lua: change a semaphore's permits for the next acquisitions.
--
-- Held permits are never revoked: with fewer permits, new acquisitions wait until the
-- holders are under the new count; with more, the waiters that now fit are woken at once.
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] permits  the new number of permits (integer >= 0)
-- ARGV[2] window   ms a woken waiter has to take its permit
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- Returns the previous number of permits (-1: none was stored)
local S = shared_keys(ARGV[3])
local previous = tonumber(redis.call('GET', S.capacity) or '-1')
redis.call('SET', S.capacity, ARGV[1])
local now = now_ms()
purge(S, now)
walk(S, tonumber(ARGV[1]), now, tonumber(ARGV[2]), nil)
return previous
