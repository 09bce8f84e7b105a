--[[
  A running or blocked run becomes cancelled; answers 1 when it did, 0 for a run that had
  already ended. Rows recorded afterwards (in flight at the cancel) still count, but never
  complete the run (complete_if_done moves only running runs).
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

local status = redis.call('HGET', runKey, 'status')
if status ~= 'running' and status ~= 'blocked' then return 0 end
set_status('cancelled', now, reason)
return 1
