-- fenced_write.lua: change a fenced resource only if the writer's fence is not older.
--
-- The compare-and-set at the protected resource: a write carrying a fence below the highest
-- fence this resource ever accepted comes from a holder that lost its lock (paused, cut off)
-- and is refused. An equal fence is accepted: the same holder writing twice.
-- KEYS[1] data   HASH    the resource's fields (absent when empty or deleted)
-- KEYS[2] meta   HASH    fence = highest fence accepted, version = writes accepted; it never
--                        expires and no script deletes it, so the mark survives a delete
-- ARGV[1] fence  the writer's fencing token (integer >= 0)
-- ARGV[2] mode   "replace": the data becomes exactly ARGV[3..]; "merge": set ARGV[3..] and
--                keep the other fields; "delete": remove the data (ARGV[3..] empty)
-- ARGV[3..] field, value, field, value, ...
-- Returns {1, fence, version} when accepted (version counts this write), or
--         {0, highest, version} when refused (nothing was changed)
local fence = tonumber(ARGV[1])
local mode = ARGV[2]
local highest = tonumber(redis.call('HGET', KEYS[2], 'fence') or '-1')
local version = tonumber(redis.call('HGET', KEYS[2], 'version') or '0')
-- the one safety-critical line: strictly older fences never write
if fence < highest then return {0, highest, version} end

if mode == 'replace' or mode == 'delete' then redis.call('DEL', KEYS[1]) end
if #ARGV > 2 then redis.call('HSET', KEYS[1], unpack(ARGV, 3)) end
version = redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('HSET', KEYS[2], 'fence', ARGV[1])
return {1, fence, version}
