--[[
  Lifts one kind of hold from a workspace and says whether another kind still holds it, in one
  step, so two lifts never both see the other still there.
  KEYS[1] holdsKey  the workspace's holds hash
  ARGV[1] kind      the hold to lift
  Returns {removed (0/1), holds left}.
]]
local holdsKey = KEYS[1]
local kind = ARGV[1]
local n = redis.call('HDEL', holdsKey, kind)
return { n, redis.call('HLEN', holdsKey) }
