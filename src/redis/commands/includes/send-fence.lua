--[[
  The checks every send passes first (runs/row-fence.ts): the worker's job attempt is current
  (its BullMQ lock still holds its token), the row is still in the job's retry round, the row
  has no result yet, and its run still exists and was neither cancelled nor failed for evicted
  keys (unless the row's create may have been applied: its marker, or its send evidence, is
  there). Returns from the script when one fails.
  Expects the locals row, round, token, bucketKey, roundsKey (`<run key>:rounds`), lockKey.
]]
if redis.call('GET', lockKey) ~= token then return {'refused', 'lock'} end
if (redis.call('HGET', roundsKey, row) or '0') ~= round then return {'refused', 'round'} end
if redis.call('HEXISTS', bucketKey, row) == 1 then return {'has-result'} end
-- A cancelled run sends no more rows, whichever job holds them: the row is recorded cancelled.
-- The run's record and create markers are named from the rounds key (same hash tag), so the
-- KEYS the scripts share stay as they are. A create an earlier attempt may have applied (its
-- marker is left) still goes on to resolve that doubt.
local fence_run_key = string.sub(roundsKey, 1, -8)
local fence_run = redis.call('HMGET', fence_run_key, 'status', 'reason')
-- A run whose record is gone (evicted, flushed) cannot store the row's result: nothing is sent.
if not fence_run[1] then return {'refused', 'gone'} end
-- (The marker is looked up only for a stopped run: a running one's rows need not, and every row
-- passes here.) The send's evidence beside the row's result counts as a marker: the marker's key
-- may have expired (create-marker).
--- @include "includes/create-marker"
local function fence_in_doubt()
  return redis.call('HEXISTS', fence_run_key .. ':creating', row) == 1
    or redis.call('HEXISTS', bucketKey, sent_field(row)) == 1
end
if fence_run[1] == 'cancelled' and not fence_in_doubt() then return {'refused', 'cancelled'} end
-- A run failed because Redis evicted keys (REDIS_EVICTS) sends no more rows either: its way on
-- is a reconciled import, which would make a second deal beside any row this run still sent.
if fence_run[1] == 'failed' and fence_run[2] and string.find(fence_run[2], '[REDIS_EVICTS]', 1, true)
  and not fence_in_doubt() then return {'refused', 'halted'} end
