-- latch_inspect.lua: the state of a latch, read atomically.
--
-- KEYS[1] count       STRING  the count left (absent: not counting)
-- KEYS[2] generation  STRING  rounds completed
-- KEYS[3] waiters     ZSET    waiting tokens
-- Returns {count, generation, waiters}
--         {-3, i}: KEYS[i] holds data of a kind redlease does not write there (nothing read)
local kinds = {'string', 'string', 'zset'}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' and kind ~= kinds[i] then return {-3, i} end
end
for i = 1, 2 do
  local value = redis.call('GET', KEYS[i])
  if value and not string.match(value, '^%d+$') then return {-3, i} end
end
return {tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '0'),
        redis.call('ZCARD', KEYS[3])}
