--[[
  Rows handed to the queue. With a row, a producer that repeats a step after losing Redis's
  answer counts it once, and producedRow says how far a producer got (where a resumed one goes
  on). Answers -1 and counts nothing once the run is cancelled: the producer then queues no
  more rows; 0 for a repeated step, 1 when counted.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  ARGV[1] count     rows queued
  ARGV[2] throughRow  the highest row among them ('' = not tracked)
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local count, throughRow = ARGV[1], ARGV[2]
--- @include "includes/run-status"

if redis.call('HGET', runKey, 'status') == 'cancelled' then return -1 end
if throughRow ~= '' then
  if tonumber(throughRow) <= tonumber(redis.call('HGET', runKey, 'producedRow') or '0') then return 0 end
  redis.call('HSET', runKey, 'producedRow', throughRow)
end
redis.call('HINCRBY', runKey, 'total', count)
redis.call('HINCRBY', runKey, 'queued', count)
return 1
