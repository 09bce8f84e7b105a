--[[
  The producer is done: the run completes now if its queued rows all have results.
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

redis.call('HSET', runKey, 'producerDone', '1')
complete_if_done(now)
return 1
