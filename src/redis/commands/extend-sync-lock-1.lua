--[[
  Renews a sync's lock only while it is still the holder's. Answers 1 when renewed, 0 when the
  lock expired or another scheduler holds it (the holder has lost it and must stop).
  KEYS[1] lockKey
  ARGV[1] token    the holder's token
  ARGV[2] ttlMs
]]
local lockKey = KEYS[1]
local token, ttlMs = ARGV[1], ARGV[2]

if redis.call('GET', lockKey) == token then return redis.call('PEXPIRE', lockKey, ttlMs) end
return 0
