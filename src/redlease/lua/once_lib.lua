-- once_lib.lua: helpers prepended to every Once script, after lock_lib.lua (now_ms, the
-- server's clock for every deadline of a Once; next_fence). See _core/once.py for the keys.
--
-- The run hash: state (running | done | failed), token, fence (the last run's), start, end,
-- until (when the name is free again, server ms), every (ms), host, pid. It never expires;
-- neither does the fence counter beside it (a STRING, raised by next_fence).

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
