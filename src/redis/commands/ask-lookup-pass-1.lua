--[[
  Asks for a deal-list pass of the workspace (runs/lookup-pass-board.ts) that finds deals
  created from `from` on; the need is remembered for the next pass when this one must wait.
  KEYS[1] boardKey  the workspace's lookup board
  ARGV[1] from      the earliest creation time needed (CRM clock, ms)
  ARGV[2] token     the asking process's token
  ARGV[3] leaseMs   the pass's lease
  ARGV[4] ttlMs     how long the board outlives its last use
  Returns {'run', from, now} (the pass is the caller's) or {'wait', ms, now, passStartedAt}:
  passStartedAt is the start of the pass under way elsewhere, -1 when the wait is the gap after one.
]]
local boardKey = KEYS[1]
local from, token, leaseMs, ttlMs = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
--- @include "includes/redis-clock"

local now = now_ms()
local f = redis.call('HMGET', boardKey, 'next', 'want', 'holder', 'leaseUntil', 'passStartedAt')
local want = tonumber(f[2])
if want == nil or from < want then
  want = from
  redis.call('HSET', boardKey, 'want', want)
end
redis.call('PEXPIRE', boardKey, ttlMs)
local lease = tonumber(f[4]) or 0
if f[3] and lease > now then return {'wait', lease - now, now, tonumber(f[5]) or -1} end
local nxt = tonumber(f[1]) or 0
if now < nxt then return {'wait', nxt - now, now, -1} end
redis.call('HSET', boardKey, 'holder', token, 'leaseUntil', now + leaseMs, 'passStartedAt', now, 'passFrom', want)
redis.call('HDEL', boardKey, 'want')
return {'run', want, now}
