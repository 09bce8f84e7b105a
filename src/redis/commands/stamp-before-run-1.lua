--[[
  When a worker process of the workspace first asked for a run's before-values (DriftCheck):
  the first caller's time is kept, later callers read it, and each call keeps it ttlMs longer.
  A before-value pass begun earlier (Redis clock) serves none of the run's rows.
  KEYS[1] runKey  the run's stamp (<p>:ws:{<w>}:before-run:<id>)
  ARGV[1] ttlMs   how long the stamp outlives its last caller
  Returns {firstAskedAt, now}.
]]
local runKey = KEYS[1]
local ttlMs = ARGV[1]
--- @include "includes/redis-clock"

local now = now_ms()
local first = tonumber(redis.call('GET', runKey))
if first == nil then
  first = now
  redis.call('SET', runKey, first, 'PX', ttlMs)
else
  redis.call('PEXPIRE', runKey, ttlMs)
end
return {first, now}
