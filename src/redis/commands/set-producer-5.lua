--[[
  Who produces the run, stored in the run's hash (so it goes with the run), only for a run that
  exists.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] producer  `host/pid/start`, or `exited@<ISO>` once that process has stopped
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local producer = ARGV[1]
--- @include "includes/run-status"

redis.call('HSET', runKey, 'producer', producer)
return 1
