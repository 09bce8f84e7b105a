--[[
  The checks every send passes first (runs/row-fence.ts): the worker's job attempt is current
  (its BullMQ lock still holds its token), the row is still in the job's retry round, the row
  has no result yet, and its run was not cancelled. Returns from the script when one fails.
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
if redis.call('HGET', fence_run_key, 'status') == 'cancelled'
  and redis.call('HEXISTS', fence_run_key .. ':creating', row) == 0 then return {'refused', 'cancelled'} end
