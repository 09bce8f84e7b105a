--[[
  Verifies a dashboard session and slides it in one step (dashboard/session-store.ts): the
  record holds its absolute end (epoch ms); a live session's key lives the idle time more,
  never past that end. An ended session's key is removed. Answers 1 while the session lives.
  KEYS[1] sessionKey
  ARGV[1] now     epoch ms (the dashboard's clock, the one that wrote the end)
  ARGV[2] idleMs
]]
local sessionKey = KEYS[1]
local now, idleMs = tonumber(ARGV[1]), tonumber(ARGV[2])

local v = redis.call('GET', sessionKey)
if not v then return 0 end
local untilMs = tonumber(v)
if untilMs == nil or untilMs <= now then
  redis.call('DEL', sessionKey)
  return 0
end
redis.call('PEXPIRE', sessionKey, math.min(idleMs, untilMs - now))
return 1
