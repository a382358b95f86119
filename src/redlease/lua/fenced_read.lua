-- fenced_read.lua: a fenced resource's fields with the fence and version that wrote them.
--
-- KEYS[1] data   HASH    the resource's fields
-- KEYS[2] meta   HASH    fence = highest fence accepted, version = writes accepted
-- (no ARGV)
-- Returns {highest fence (-1 if never written), version (0 if never written),
--          field, value, field, value, ...}, read in one step (read-only)
local meta = redis.call('HMGET', KEYS[2], 'fence', 'version')
local reply = {tonumber(meta[1] or '-1'), tonumber(meta[2] or '0')}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields do reply[#reply + 1] = fields[i] end
return reply
