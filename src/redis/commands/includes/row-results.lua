--[[
  Storing one row's result, shared by every script that records one (record-results, and the
  create's finish-create), so counts, the problems index and maxRow move the same way whichever
  path wrote the row. Needs run-status and result-bucket; expects the local problemsKey.
]]
-- The order the scripts answer counts in (COUNT_NAMES in runs/run-store.ts).
local COUNTS = { 'total', 'queued', 'succeeded', 'failed', 'skipped', 'invalid', 'superseded', 'uncertain', 'cancelled', 'drifted' }
local NAMES = { s = 'succeeded', k = 'skipped', i = 'invalid', f = 'failed', p = 'superseded', u = 'uncertain', c = 'cancelled', d = 'drifted' }
local PROBLEM = { failed = true, invalid = true, uncertain = true, cancelled = true }
local delta = { total = 0, queued = 0, succeeded = 0, failed = 0, skipped = 0, invalid = 0, superseded = 0, uncertain = 0, cancelled = 0, drifted = 0 }
local max_row = tonumber(redis.call('HGET', runKey, 'maxRow') or '0')

-- Writes the row's result and moves the counts in 'delta'; flush_results() applies them.
local function put_result(row, value, from_queue, previous)
  local status = NAMES[string.sub(value, 1, 1)]
  if previous then
    local p = NAMES[string.sub(previous, 1, 1)]
    delta[p] = delta[p] - 1
  elseif from_queue then
    delta.queued = delta.queued - 1
  else
    delta.total = delta.total + 1
  end
  delta[status] = delta[status] + 1
  redis.call('HSET', bucket(row), row, value)
  if PROBLEM[status] then
    redis.call('ZADD', problemsKey, row, row)
  else
    redis.call('ZREM', problemsKey, row)
  end
  local r = tonumber(row)
  if r > max_row then max_row = r end
end

local function flush_results(now)
  for _, field in ipairs(COUNTS) do
    if delta[field] ~= 0 then redis.call('HINCRBY', runKey, field, delta[field]) end
  end
  redis.call('HSET', runKey, 'maxRow', max_row)
  complete_if_done(now)
end

-- Why a queued row's writer may not store its result, or nil when it may. 'lock': the writer's
-- job attempt is no longer the current one (another worker owns the job); 'round': the row was
-- retried since (runs retry) and belongs to a newer job; 'exists': the row has its result.
local function write_refused(row, lock_key, token, round, rounds_key)
  if lock_key ~= '' and redis.call('GET', lock_key) ~= token then return 'lock' end
  if round ~= '' and (redis.call('HGET', rounds_key, row) or '0') ~= round then return 'round' end
  if redis.call('HEXISTS', bucket(row), row) == 1 then return 'exists' end
  return nil
end
