-- once_lib.lua: the run record of a Once, after common_lib.lua (whose now_ms is the clock of
-- every deadline of a Once, and next_fence its fencing counter). See _core/once.py for the keys.
-- Provides: ours, running. Loaded by: _core/once.py (every once_* script).
--
-- The run hash: state (running | done | failed | released: by an operator), token, fence (the
-- last run's), start, end, until (when the name is free again, server ms), every (ms), host,
-- pid. It never expires; neither does the fence counter beside it (a STRING, raised by
-- next_fence).

-- Whether `key` is absent or of type `kind`, a hash by default (anything else was not written
-- by redlease).
local function ours(key, kind)
  local found = redis.call('TYPE', key)
  found = type(found) == 'table' and found.ok or found
  return found == 'none' or found == (kind or 'hash')
end

-- Whether the run `token` is the one in progress in `key` at `now` (its lease not run out).
local function running(key, token, now)
  local run = redis.call('HMGET', key, 'state', 'token', 'until')
  return run[1] == 'running' and run[2] == token and tonumber(run[3]) > now
end
