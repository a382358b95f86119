-- release.lua: compare-token-and-delete, then pass the lock on to the queue head.
--
-- KEYS[1] lock     STRING  holder's token
-- KEYS[2] fence    STRING  fencing counter (modes G and B: a grant issues the next fence)
-- KEYS[3] queue    ZSET    waiters, FIFO
-- KEYS[4] handoff  STRING  reservation for the queue head (mode R); head since (mode B)
-- ARGV[1] token    the releasing acquisition's token
-- ARGV[2] window   ms the queue head has to take (mode R) or claim (modes G, B) the lock
-- ARGV[3] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[4] mode     optional: "G" grant it to the head; "B" barging; "R" (default) reserve it
--                  for the head (see lock_lib.lua)
-- ARGV[5] barge    mode B: ms a queue head waits at the head before it is granted the lock
-- ARGV[6] tell     optional, mode R: "0" reserves the lock without telling anyone (Redlock tells
--                  the waiter from a few of its servers only: one message wakes it)
-- ARGV[7] rotation optional, mode B: ms the queued waiters share: a new head's turn is this
--                  divided by their number, at least 1 ms and at most ARGV[5] (default: ARGV[5])
-- ARGV[8] requeue  optional, mode R: "<score> <lease>": the releasing acquisition goes on
--                  waiting (Redlock undoing a round it did not win): it is queued at <score>,
--                  its ticket, as it is on the servers that refused it, before the lock is
--                  reserved for the head (not told if it is the caller). Otherwise a server
--                  that granted it would lack it in its queue, reserve the lock for another
--                  head than the rest do, and split the next vote too (a crowd arriving at
--                  once kept splitting that way).
-- ARGV[9] lease    optional, mode G: the releaser's lease in ms ("0": none); a head that
--                  joined the queue within the window is granted the lock on it, unclaimed
-- Returns 1 released; 0 not held with this token (nothing was changed)
local lock, fence, queue, handoff = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, window, channels = ARGV[1], tonumber(ARGV[2]), ARGV[3]
if ARGV[6] == '0' then channels = false end

-- The one safety-critical line: never delete a lock whose token is not ours.
if redis.call('GET', lock) ~= token then return 0 end
redis.call('DEL', lock)
local requeue = ARGV[8] or ''
if requeue ~= '' then
  local score, lease = string.match(requeue, '^(%d+) (%d+)$')
  enqueue(queue, token, tonumber(score), tonumber(lease), window, 0)
  -- Reserved for the caller itself, it is not told: it tries again when the servers that
  -- refused it tell it to (told here, it would try again at once, and again, for as long as
  -- another holder keeps those).
  hand_off(queue, handoff, channels, window, token)
  return 1
end
local barge_ms, rotation_ms = tonumber(ARGV[5] or '0'), tonumber(ARGV[7] or '0')
local lease_ms = tonumber(ARGV[9] or '0')
if lease_ms <= 0 then lease_ms = nil end
pass_on(lock, fence, queue, handoff, channels, window, ARGV[4] or 'R', barge_ms, rotation_ms,
        lease_ms)
return 1
