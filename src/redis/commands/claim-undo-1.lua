--[[
  Makes an undo plan the newest undo of its run (src/undo/plan-undo.ts), so every older undo
  plan of the run is refused at approve and apply (move-plan-2.lua: 'superseded'). Refused when
  another undo plan of the run was taken for applying since this one began reading the CRM: its
  read may be from before that undo's writes, and applying it would write over them.
  KEYS[1] claimKey   the undo of the run (keys undoClaimKey): plan, taken, takenMs
  ARGV[1] planId     the new undo plan
  ARGV[2] readMs     when the plan began (PlanWriter.createdMs, Redis clock), before its list read
  ARGV[3] expireAt   when the claim may go (ms): when the new plan's keys do
  Answers {'ok'} or {'undone', taken}: the undo plan taken since.
]]
local claimKey = KEYS[1]
local planId, readMs, expireAt = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local taken = redis.call('HGET', claimKey, 'taken')
if taken and taken ~= planId and tonumber(redis.call('HGET', claimKey, 'takenMs') or '0') >= readMs then
  return { 'undone', taken }
end
redis.call('HSET', claimKey, 'plan', planId)
-- Older plans of the run expire before the newest: the claim lives as long as it.
redis.call('PEXPIREAT', claimKey, expireAt)
return { 'ok' }
