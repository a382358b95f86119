-- shared_release.lua: give back a holder's units, then reserve them for the waiters that fit.
--
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] token    the releasing holder's token
-- ARGV[2] window   ms a reserved waiter has to take its units
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[4] capacity units of the resource (as ARGV[7] of shared_acquire.lua)
-- ARGV[5] stored   "1": the capacity is KEYS[6]; "0": ARGV[4]
-- Returns 1 released; 0 this token held nothing (its lease ran out, or it never held)
local S = shared_keys(ARGV[3])
local token, window = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local score = redis.call('ZSCORE', S.holders, token)
local held = score and tonumber(score) > now
if held then
  redis.call('ZREM', S.holders, token)
  forget(S, token)
  notify(S)
end
purge(S, now)
walk(S, capacity(S, tonumber(ARGV[4]), ARGV[5] == '1'), now, window, nil)
if held then return 1 end
return 0
