--[[
  Ends a pass: the next may start gapMs from now; its deals become the workspace's snapshot.
  Answers 0 when the token had lost the pass (its lease ran out and another process took over).
  KEYS[1] boardKey  the workspace's lookup board
  KEYS[2] snapKey   the last pass's deals
  ARGV[1] token
  ARGV[2] gapMs     the least time until the next pass
  ARGV[3] body      the deals the pass saw ('' = none: the snapshot stays as it was)
  ARGV[4] ttlMs     how long board and snapshot outlive their last use
]]
local boardKey, snapKey = KEYS[1], KEYS[2]
local token, gapMs, body, ttlMs = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
--- @include "includes/redis-clock"

local now = now_ms()
if redis.call('HGET', boardKey, 'holder') ~= token then return 0 end
local p = redis.call('HMGET', boardKey, 'passStartedAt', 'passFrom')
redis.call('HDEL', boardKey, 'holder', 'leaseUntil', 'passStartedAt', 'passFrom')
redis.call('HSET', boardKey, 'next', now + gapMs)
if body ~= '' then
  redis.call('SET', snapKey, body, 'PX', ttlMs)
  redis.call('HSET', boardKey, 'snapStartedAt', p[1], 'snapFrom', p[2])
end
redis.call('PEXPIRE', boardKey, ttlMs)
return 1
