--[[
  A retry or resume is producing again: the run must not complete between its chunks; a new
  pass begins.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] now           ISO time
  ARGV[2] lastPassMs    ms the pass before took ('' when it had not ended)
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, lastPassMs = ARGV[1], ARGV[2]
--- @include "includes/run-status"

redis.call('HSET', runKey, 'producerDone', '0', 'sourceRead', '0', 'producerSeenAt', now, 'passStartedAt', now)
redis.call('HINCRBY', runKey, 'passes', 1)
if lastPassMs ~= '' then redis.call('HINCRBY', runKey, 'activeMs', lastPassMs) end
set_status('running', now, nil)
return 1
