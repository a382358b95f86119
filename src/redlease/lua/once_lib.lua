-- once_lib.lua: helpers prepended to every Once script (see _core/once.py for the hash).
--
-- The run hash: state (running | done | failed), token, fence, start, end, until (when the
-- name is free again, server ms), every (ms), host, pid. It never expires: its fence field is
-- the fencing counter, never reset.

-- Server time in ms: every deadline of a Once is on the server's clock, never a client's.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether `key` is absent or a hash (anything else was not written by redlease).
local function ours(key)
  local kind = redis.call('TYPE', key)
  kind = type(kind) == 'table' and kind.ok or kind
  return kind == 'none' or kind == 'hash'
end

-- Whether the run `token` is the one in progress in `key` at `now` (its lease not run out).
local function running(key, token, now)
  local run = redis.call('HMGET', key, 'state', 'token', 'until')
  return run[1] == 'running' and run[2] == token and tonumber(run[3]) > now
end
