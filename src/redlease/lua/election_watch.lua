-- election_watch.lua: one look of a watcher: has the leadership changed since the term it knows?
--
-- KEYS[1..8] as in shared_acquire.lua (holders, units, queue, granted, fence, capacity,
--            payload, watchers)
-- ARGV[1] token    the watcher's token
-- ARGV[2] join     "1": if nothing changed, join the watchers (the caller is subscribed)
-- ARGV[3] term     the term the watcher knows (0: no leader; -1: none yet, answer at once)
-- ARGV[4] channels prefix of the waiters' channels (a process id completes it)
-- ARGV[5] keep     ms the watchers' set is kept without a look from any watcher
-- ARGV[6] seen     the highest term the watcher has been told of (by this script's "latest")
-- Returns {1, term, value, latest}  the leader now (term 0 and value "": nobody leads), if it
--                                   differs; or, when nobody leads and the latest term is above
--                                   `seen` (it began and ended between two looks), that term.
--                                   latest: the latest term granted (0: never)
--         {0, ms}                   unchanged; the leader's lease ends in ms (-1: nobody leads)
local S = shared_keys(ARGV[4])
local now = now_ms()
purge(S, now)
local function split(payload)
  local space = string.find(payload, ' ', 1, true)
  return tonumber(string.sub(payload, 1, space - 1)), string.sub(payload, space + 1)
end
local first = redis.call('ZRANGE', S.holders, 0, 0, 'WITHSCORES')
local term, value, ms = 0, '', -1
if first[1] then
  term, value = split(redis.call('HGET', S.payload, first[1]) or '0 ')
  ms = math.max(tonumber(first[2]) - now, 1)
end
local latest, latest_value = split(redis.call('HGET', S.payload, '') or '0 ')
local known = tonumber(ARGV[3])
if known ~= -1 and term == 0 and latest > tonumber(ARGV[6]) then
  return {1, latest, latest_value, latest}
end
if term ~= known then return {1, term, value, latest} end
if ARGV[2] == '1' then
  redis.call('ZADD', S.watchers, 'NX', now_us(), ARGV[1])
  keep(S.watchers, tonumber(ARGV[5]))
end
return {0, ms}
