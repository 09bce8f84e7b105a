--[[
  Only a blocked run resumes (answers 1 when it did); if its last rows finished while it was
  blocked, it completes now instead of waiting for results that will never come.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] now  ISO time
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = ARGV[1]
--- @include "includes/run-status"

if redis.call('HGET', runKey, 'status') ~= 'blocked' then return 0 end
set_status('running', now, nil)
complete_if_done(now)
return 1
