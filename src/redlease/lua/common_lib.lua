-- common_lib.lua: the helpers every family library builds on.
-- Provides: now_us, now_ms (the server's clock), next_fence (fencing counters), tell (a
-- message to a waiter's process). Loaded by: _core/lock.py, shared.py, once.py, latch.py,
-- inventory.py, ratelimit.py, semaphore.py, election.py, breakglass.py, first in every
-- prelude (lock_lib, shared_lib, once_lib, inventory_lib and ratelimit_lib use it).
--
-- A token is "<process id>.<random>"; each process listens on its own channel
-- <channels><process id>, and is told only what concerns its own waiters. On a Redis Cluster
-- <channels> carries the hash tag of the keys ("redlease:waiters:{<name>}:"): the channel is
-- in their slot and is told with SPUBLISH (sharded, Redis >= 7.0; never broadcast to every
-- node). Without a tag (one server, any version): PUBLISH.
-- The messages, "<letter><token> <detail>", parsed by _core/waiters.py:
--   "G<token> <fence> <ms> <now>"  the lock was GRANTED to <token> (direct hand-off): it holds
--                           it with fencing token <fence> and a lease of <ms> until it claims it;
--                           <now> is the server's time in ms (how late the message is read)
--   "H<token> <window ms>"  free and reserved for <token> for <window ms> (0: look now: a
--                           latch opened, the holders of a shared resource changed)
--   "F<token> <ms>"         the lock is free (barging mode): try now; it is handed to you
--                           directly at a release <ms> from now, if others keep taking it
--   "N<token> <window ms>"  the waiter ahead of <token> has <window ms> to take or claim it
--   "T<token> <lease ms>"   the waiter ahead of <token> took it, with a lease of <lease ms>

-- Server time in us. Hold deadlines use the server's clock, never a client's.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Server time in ms.
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- Issue the next fencing token of the counter `fence`: max(counter + 1, server time in us).
-- Larger than every token issued from the counter, and, should the counter be lost with the
-- server's data (restart without persistence, FLUSHALL, eviction), still larger than every
-- token issued before, as long as the server's clock did not go back. Exact as a Lua number
-- (a double) below 2^53 us, the year 2255; stored and told with %d (Lua would print 14
-- significant digits). KEEPTTL: a counter given an expiry (redlease.cached's, cache_arm.lua;
-- QueueOnce's) keeps it, so no acquisition leaves it behind for good.
local function next_fence(fence)
  local issued = math.max(tonumber(redis.call('GET', fence) or '0') + 1, now_us())
  redis.call('SET', fence, string.format('%d', issued), 'KEEPTTL')
  return issued
end

-- Tell the process that queued `token` the message `letter` (see above) with `detail`
-- (tokens without a process id are nobody's to tell; `channels` false: tell nobody).
-- Returns how many subscribers heard it: 0 means that process does not listen (it died, or
-- its subscription broke), so it cannot take a turn it is given.
local function tell(channels, token, letter, detail)
  local dot = channels and string.find(token, '.', 1, true)
  if not dot then return 0 end
  local command = string.find(channels, '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
  return redis.call(command, channels .. string.sub(token, 1, dot - 1),
    letter .. token .. ' ' .. detail)
end
