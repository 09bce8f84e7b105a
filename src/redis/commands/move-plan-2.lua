--[[
  Moves a plan (src/plans) from one status to the next in one atomic step, so a plan is
  approved, discarded or taken for applying once, whatever runs at the same time.
  KEYS[1] planKey    the plan's hash (plans/plan-store.ts)
  KEYS[2] claimKey   an undo plan's "undo of run X" (keys undoClaimKey; claim-undo-1.lua); any
                     other plan passes its planKey again, unread
  ARGV[1] action     'approve' | 'discard' | 'apply' (take it for applying) | 'applied' (its
                     writes are all queued) | 'unapply' (taking it failed before any row was queued)
  ARGV[2] by         approve, discard: who (a CLI user or a dashboard session); apply, applied,
                     unapply: the applying process's token
  ARGV[3] required   apply: '1' when the workspace requires approval
  Answers {'ok', status} or {'refused', why, status[, other]}: why is 'expired', 'discarded',
  'applied', 'applying', 'unapproved', 'pending' (applied before approval), or for an undo plan
  'superseded' (a newer undo plan of the run was made: other names it) or 'undone' (another undo
  plan of the run, other, was taken for applying since this one was made); {'missing'} when the
  plan is gone. An undo plan taken for applying is recorded on its claim (taken, takenMs); one
  given back (unapply) is removed from it.
]]
local planKey, claimKey = KEYS[1], KEYS[2]
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
local undoOf = redis.call('HGET', planKey, 'undoOf')
local id = redis.call('HGET', planKey, 'id')
if action == 'unapply' then
  if status ~= 'applying' or redis.call('HGET', planKey, 'applyToken') ~= by then return refuse(status) end
  redis.call('HSET', planKey, 'status', redis.call('HGET', planKey, 'approvedMs') and 'approved' or 'pending')
  redis.call('HDEL', planKey, 'applyToken', 'runId')
  if undoOf and redis.call('HGET', claimKey, 'taken') == id then redis.call('HDEL', claimKey, 'taken', 'takenMs') end
  return { 'ok', 'pending' }
end

-- A plan that was applied or is being applied, or was discarded, says so before it says expired.
if status == 'applied' or status == 'applying' or status == 'discarded' then return refuse(status) end
if now >= expires then return refuse('expired') end

-- An undo plan moves only while it is the run's newest undo, and no other undo of the run was
-- taken for applying since it read the CRM (its createdMs): else it would write over an undo.
if undoOf and (action == 'approve' or action == 'apply') then
  local taken = redis.call('HGET', claimKey, 'taken')
  local takenMs = tonumber(redis.call('HGET', claimKey, 'takenMs') or '0')
  if taken and taken ~= id and takenMs >= tonumber(redis.call('HGET', planKey, 'createdMs') or '0') then
    return { 'refused', 'undone', status, taken }
  end
  local newest = redis.call('HGET', claimKey, 'plan')
  if newest and newest ~= id then return { 'refused', 'superseded', status, newest } end
end

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
  if undoOf then redis.call('HSET', claimKey, 'taken', id, 'takenMs', now) end
  return { 'ok', 'applying' }
end
return redis.error_reply('ERR move-plan: unknown action ' .. tostring(action))
