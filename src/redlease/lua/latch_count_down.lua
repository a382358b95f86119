-- latch_count_down.lua: count down by one; at 0, release every waiter (once) and stop counting.
--
-- KEYS[1] count       STRING  the count left (absent: not counting)
-- KEYS[2] generation  STRING  rounds completed (INCR'd each time the count reaches 0)
-- KEYS[3] waiters     ZSET    waiting tokens -> when they joined (server us)
-- ARGV[1] channels    prefix of the waiters' channels (a process id completes it)
-- Returns the count left (0: the latch opened now, or was not counting)
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count <= 0 then return 0 end
if count > 1 then return redis.call('DECR', KEYS[1]) end
redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[2])
for _, t in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  tell(ARGV[1], t, 'H', 0)
end
redis.call('DEL', KEYS[3])
return 0
