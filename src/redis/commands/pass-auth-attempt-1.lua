--[[
  A right token gives its place back (never into a window that has ended); nothing left, no key.
  KEYS[1] clientKey  (acquire-auth-attempt)
]]
local clientKey = KEYS[1]

if redis.call('EXISTS', clientKey) == 0 then return 0 end
local i = redis.call('HINCRBY', clientKey, 'i', -1)
if i < 0 then redis.call('HSET', clientKey, 'i', 0) end
local f = tonumber(redis.call('HGET', clientKey, 'f') or '0')
if f == 0 and i <= 0 then redis.call('DEL', clientKey) end
return 1
