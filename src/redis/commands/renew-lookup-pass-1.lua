--[[
  Keeps a pass while it reads pages. Answers 1 while the token still holds the pass, 0 once
  another process has taken it over.
  KEYS[1] boardKey  the workspace's lookup board
  ARGV[1] token
  ARGV[2] leaseMs
]]
local boardKey = KEYS[1]
local token, leaseMs = ARGV[1], tonumber(ARGV[2])
--- @include "includes/redis-clock"

local now = now_ms()
if redis.call('HGET', boardKey, 'holder') ~= token then return 0 end
redis.call('HSET', boardKey, 'leaseUntil', now + leaseMs)
return 1
