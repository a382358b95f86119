-- once_force_release.lua: break-glass: end the run in progress, or clear the success that keeps
-- the name, so that a new run may start at once (an operator's redlease release --force).
--
-- KEYS[1] run    HASH    the last run (see once_lib.lua)
-- KEYS[2] fence  STRING  the fencing counter (moved on with next_fence, as a start does)
-- ARGV[1] token  "": whichever run keeps the name; else only the run whose token starts
--                with this (inspect shows a token's start, never all of it)
-- Returns {token, state, fence, counter}: the run released, its state ("running": a live
--         lease, evicted; "done": a success within its period, cleared), its fence, and the
--         counter after the move (above every fence the run had). The run is left "released"
--         (free now): its holder finds out at its next renewal (on_lost), its finish and fail
--         are refused.
--         {"", "", 0, counter}  nothing kept the name (no run, a failure, a lease or period
--                               run out) or another run than ARGV[1] did: nothing changed
--         {-3, i}               KEYS[i] holds data redlease did not write
local key, counter = KEYS[1], KEYS[2]
if not ours(key) then return {-3, 1} end
if not ours(counter, 'string') then return {-3, 2} end
local now = now_ms()
local run = redis.call('HMGET', key, 'state', 'token', 'until', 'fence')
local kept = (run[1] == 'running' or run[1] == 'done') and tonumber(run[3]) > now
if not kept or (ARGV[1] ~= '' and string.sub(run[2], 1, #ARGV[1]) ~= ARGV[1]) then
  return {'', '', 0, tonumber(redis.call('GET', counter) or '0')}
end
if run[1] == 'running' then redis.call('HSET', key, 'end', now) end
redis.call('HSET', key, 'state', 'released', 'until', now)
return {run[2], run[1], tonumber(run[4]), next_fence(counter)}
