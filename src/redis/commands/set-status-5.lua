--[[
  Moves the run to a status, whatever it was.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] status
  ARGV[2] now     ISO time
  ARGV[3] reason  ('' = none)
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local status, now, reason = ARGV[1], ARGV[2], ARGV[3]
--- @include "includes/run-status"

set_status(status, now, reason)
return 1
