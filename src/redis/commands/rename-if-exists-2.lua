--[[
  RENAME that does nothing when the source is gone, so a layout migration
  (runtime/migrate-layout.ts) can run again after a crash. Answers 1 when renamed.
  KEYS[1] fromKey
  KEYS[2] toKey
]]
local fromKey, toKey = KEYS[1], KEYS[2]

if redis.call('EXISTS', fromKey) == 0 then return 0 end
redis.call('RENAME', fromKey, toKey)
return 1
