--[[
  A wrong token: its place stays taken for the window, which starts with the first one.
  KEYS[1] clientKey  (acquire-auth-attempt)
  ARGV[1] windowMs
  Returns {failures, ttlMs}.
]]
local clientKey = KEYS[1]
local windowMs = ARGV[1]

if redis.call('HINCRBY', clientKey, 'i', -1) < 0 then redis.call('HSET', clientKey, 'i', 0) end
local f = redis.call('HINCRBY', clientKey, 'f', 1)
if f == 1 or redis.call('PTTL', clientKey) < 0 then redis.call('PEXPIRE', clientKey, windowMs) end
return {f, redis.call('PTTL', clientKey)}
