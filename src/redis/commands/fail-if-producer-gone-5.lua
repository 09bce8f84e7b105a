--[[
  A run still reading its source whose producer went silent is failed: answers 1 when it was,
  2 when every row had been queued or recorded (the run is finished instead), 0 otherwise.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] now         ISO time
  ARGV[2] seenBefore  the oldest acceptable producerSeenAt (ISO)
  ARGV[3] reason
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, seenBefore, reason = ARGV[1], ARGV[2], ARGV[3]
--- @include "includes/run-status"

local f = redis.call('HMGET', runKey, 'status', 'producerDone', 'producerSeenAt', 'createdAt', 'sourceRead')
if (f[1] ~= 'running' and f[1] ~= 'blocked') or f[2] == '1' then return 0 end
local seen = f[3] or f[4]
if seen >= seenBefore then return 0 end
if f[5] == '1' then
  -- Every row was queued or recorded before the producer died: it only missed saying so.
  redis.call('HSET', runKey, 'producerDone', '1')
  complete_if_done(now)
  return 2
end
set_status('failed', now, reason)
return 1
