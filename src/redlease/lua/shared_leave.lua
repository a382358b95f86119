-- shared_leave.lua: a waiter (or watcher) gives up: leave the queue, pass on its reservation.
--
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] token    the waiter's token
-- ARGV[2] window   ms a reserved waiter has to take its units
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[4] capacity units of the resource (as ARGV[7] of shared_acquire.lua)
-- ARGV[5] stored   "1": the capacity is KEYS[6]; "0": ARGV[4]
-- Returns 1 if the token was queued (or watching), 0 if not
local S = shared_keys(ARGV[3])
local token, window = ARGV[1], tonumber(ARGV[2])
local removed = redis.call('ZREM', S.queue, token) + redis.call('ZREM', S.watchers, token)
redis.call('ZREM', S.granted, token)
if redis.call('ZSCORE', S.holders, token) == false then redis.call('HDEL', S.units, token) end
local now = now_ms()
purge(S, now)
walk(S, capacity(S, tonumber(ARGV[4]), ARGV[5] == '1'), now, window, nil)
return math.min(removed, 1)
