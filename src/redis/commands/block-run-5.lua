--[[
  Only a running run can be blocked; answers 1 when it was.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] now     ISO time
  ARGV[2] reason
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, reason = ARGV[1], ARGV[2]
--- @include "includes/run-status"

if redis.call('HGET', runKey, 'status') ~= 'running' then return 0 end
set_status('blocked', now, reason)
return 1
