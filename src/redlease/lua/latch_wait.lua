-- latch_wait.lua: one look of a waiter: is the latch open (or opened since we began waiting)?
--
-- KEYS[1] count       STRING  the count left (absent: not counting)
-- KEYS[2] generation  STRING  rounds completed (INCR'd each time the count reaches 0)
-- KEYS[3] waiters     ZSET    waiting tokens -> when they joined (server us)
-- ARGV[1] token       the waiter's token
-- ARGV[2] join        "1": if still counting, join the waiters (the caller is subscribed)
-- ARGV[3] generation  the generation seen at the first look ("" on the first look)
-- ARGV[4] keep        ms the waiters' set is kept without a look from any waiter
-- Returns {1, generation}  open: not counting, or a round completed since ARGV[3]
--         {0, generation}  still counting (the generation to pass back next time)
local generation = tonumber(redis.call('GET', KEYS[2]) or '0')
if redis.call('EXISTS', KEYS[1]) == 0 then return {1, generation} end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= generation then return {1, generation} end
if ARGV[2] == '1' then
  redis.call('ZADD', KEYS[3], 'NX', now_us(), ARGV[1])
  local keep = tonumber(ARGV[4])
  if redis.call('PTTL', KEYS[3]) < keep then redis.call('PEXPIRE', KEYS[3], keep) end
end
return {0, generation}
