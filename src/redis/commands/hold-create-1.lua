--[[
  After an uncertain answer the row keeps the create lock through the settle time, so an
  identical row waits for its lookup instead of creating a second deal meanwhile. Answers 0
  when another row holds the lock.
  KEYS[1] createLock  the fingerprint's create lock
  ARGV[1] owner       `runId/row`
  ARGV[2] ms          how long to hold it
]]
local createLock = KEYS[1]
local owner, ms = ARGV[1], ARGV[2]

local holder = redis.call('GET', createLock)
if holder and holder ~= owner then return 0 end
redis.call('SET', createLock, owner, 'PX', ms)
return 1
