--[[
  Takes one of a dashboard client's places before its token is compared
  (dashboard/auth-throttle.ts). The client's record is a hash: `f` wrong tokens in the window,
  `i` checks in flight. A check may start only while f + i < max, so however many requests
  arrive at once, at most `max` tokens are ever compared before the f of a window reaches max.
  A string key (what the rate-limit plugin this replaces kept there) is dropped on first use.
  KEYS[1] clientKey
  ARGV[1] max       wrong tokens a client may send per window
  ARGV[2] windowMs
  Returns {verdict, failures, ttlMs}: verdict 0 locked, 1 busy (all places in flight), 2 go.
]]
local clientKey = KEYS[1]
local max, windowMs = tonumber(ARGV[1]), ARGV[2]

if redis.call('TYPE', clientKey).ok == 'string' then redis.call('DEL', clientKey) end
local f = tonumber(redis.call('HGET', clientKey, 'f') or '0')
local i = tonumber(redis.call('HGET', clientKey, 'i') or '0')
local ttl = redis.call('PTTL', clientKey)
if f >= max then return {0, f, ttl} end
if f + i >= max then return {1, f, ttl} end
redis.call('HINCRBY', clientKey, 'i', 1)
if ttl < 0 then
  redis.call('PEXPIRE', clientKey, windowMs)
  ttl = tonumber(windowMs)
end
return {2, f, ttl}
