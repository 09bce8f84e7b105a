--[[
  The producer queued or recorded the source's last row: a run whose producer dies after this
  is finished by the sweep (fail-if-producer-gone), not failed.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] columns  the source's columns (JSON)
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local columns = ARGV[1]
--- @include "includes/run-status"

redis.call('HSET', runKey, 'sourceRead', '1', 'columns', columns)
return 1
