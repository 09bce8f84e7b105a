--[[
  Releases a sync's lock (schedule/sync-lock.ts) only while it is still the holder's: a lock
  that expired and was taken by another scheduler is left alone. Answers 1 when removed.
  KEYS[1] lockKey
  ARGV[1] token    the holder's token
]]
local lockKey = KEYS[1]
local token = ARGV[1]

if redis.call('GET', lockKey) == token then return redis.call('DEL', lockKey) end
return 0
