-- ratelimit_lib.lua: the head every rate-limit script shares, after common_lib.lua.
-- Provides: cost and consume (ARGV[1], ARGV[2] as the scripts document them), now (the
-- server's time in us), reply (starting with now) and answer (appends one limit's verdict).
-- Loaded by: _core/ratelimit.py (ratelimit_fixed, _sliding, _gcra, _token_bucket).
local cost, consume = tonumber(ARGV[1]), ARGV[2] == '1'
local now = now_us()
local reply = {now}
local function answer(allowed, remaining, retry_us, reset_us)
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = allowed, remaining, retry_us, reset_us
end
