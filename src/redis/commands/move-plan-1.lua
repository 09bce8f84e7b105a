--[[
  Moves a plan (src/plans) from one status to the next in one atomic step, so a plan is
  approved, discarded or taken for applying once, whatever runs at the same time.
  KEYS[1] planKey    the plan's hash (plans/plan-store.ts)
  ARGV[1] action     'approve' | 'discard' | 'apply' (take it for applying) | 'applied' (its
                     writes are all queued) | 'unapply' (taking it failed before any row was queued)
  ARGV[2] by         approve, discard: who (a CLI user or a dashboard session); apply, applied,
                     unapply: the applying process's token
  ARGV[3] required   apply: '1' when the workspace requires approval
  Answers {'ok', status} or {'refused', why, status}: why is 'expired', 'discarded', 'applied',
  'applying', 'unapproved' or 'pending' (applied before approval); {'missing'} when the plan is gone.
]]
local planKey = KEYS[1]
local action, by, required = ARGV[1], ARGV[2], ARGV[3]
--- @include "includes/redis-clock"

if redis.call('EXISTS', planKey) == 0 then return { 'missing' } end
local now = now_ms()
local status = redis.call('HGET', planKey, 'status')
local expires = tonumber(redis.call('HGET', planKey, 'expiresMs') or '0')
local function refuse(why) return { 'refused', why, status } end

if action == 'applied' then
  if status ~= 'applying' or redis.call('HGET', planKey, 'applyToken') ~= by then return refuse(status) end
  redis.call('HSET', planKey, 'status', 'applied', 'appliedMs', now)
  return { 'ok', 'applied' }
end
if action == 'unapply' then
  if status ~= 'applying' or redis.call('HGET', planKey, 'applyToken') ~= by then return refuse(status) end
  redis.call('HSET', planKey, 'status', redis.call('HGET', planKey, 'approvedMs') and 'approved' or 'pending')
  redis.call('HDEL', planKey, 'applyToken', 'runId')
  return { 'ok', 'pending' }
end

-- A plan that was applied or is being applied, or was discarded, says so before it says expired.
if status == 'applied' or status == 'applying' or status == 'discarded' then return refuse(status) end
if now >= expires then return refuse('expired') end

if action == 'approve' then
  if status == 'approved' then return { 'ok', 'approved' } end
  redis.call('HSET', planKey, 'status', 'approved', 'approvedMs', now, 'approvedBy', by)
  return { 'ok', 'approved' }
end
if action == 'discard' then
  redis.call('HSET', planKey, 'status', 'discarded', 'discardedMs', now, 'discardedBy', by)
  return { 'ok', 'discarded' }
end
if action == 'apply' then
  if status ~= 'approved' and required == '1' then return refuse('unapproved') end
  redis.call('HSET', planKey, 'status', 'applying', 'applyToken', by, 'applyMs', now)
  return { 'ok', 'applying' }
end
return redis.error_reply('ERR move-plan: unknown action ' .. tostring(action))
