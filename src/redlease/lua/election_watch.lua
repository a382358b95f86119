-- election_watch.lua: one look of a watcher: has the leadership changed since the term it knows?
--
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] token    the watcher's token
-- ARGV[2] join     "1": if nothing changed, join the watchers (the caller is subscribed)
-- ARGV[3] term     the term the watcher knows (0: no leader; -1: none yet, answer at once)
-- ARGV[4] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[5] keep     ms the watchers' set is kept without a look from any watcher
-- Returns {1, term, value}  the leader now (term 0 and value "": nobody leads), if it differs
--         {0, ms}           unchanged; the leader's lease ends in ms (-1: nobody leads)
local S = shared_keys(ARGV[4])
local now = now_ms()
purge(S, now)
local first = redis.call('ZRANGE', S.holders, 0, 0, 'WITHSCORES')
local term, value, ms = 0, '', -1
if first[1] then
  local payload = redis.call('HGET', S.payload, first[1]) or '0 '
  local space = string.find(payload, ' ', 1, true)
  term, value = tonumber(string.sub(payload, 1, space - 1)), string.sub(payload, space + 1)
  ms = math.max(tonumber(first[2]) - now, 1)
end
if term ~= tonumber(ARGV[3]) then return {1, term, value} end
if ARGV[2] == '1' then
  redis.call('ZADD', S.watchers, 'NX', now_us(), ARGV[1])
  keep(S.watchers, tonumber(ARGV[5]))
end
return {0, ms}
