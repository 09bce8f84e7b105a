--[[
  May a row's create be sent (runs/row-fence.ts beginCreate)? Sets the row's create marker
  and its send evidence beside its result (create-marker) and takes the content fingerprint's
  lock, so no two rows create one deal. A row whose marker is gone but whose evidence is there
  gets its marker back from the evidence, and is in doubt: it looks, it never POSTs blind.
  KEYS[1] bucketKey    the row's result bucket (its result, and its send evidence)
  KEYS[2] roundsKey    the run's rows' retry rounds
  KEYS[3] lockKey      the job's BullMQ lock
  KEYS[4] markersKey   the run's create markers
  KEYS[5] createLock   the fingerprint's create lock
  KEYS[6] upsertedKey  an upsert's match-key record (read only when isUpsert)
  ARGV[1] row
  ARGV[2] round        the row's retry round as its job knows it
  ARGV[3] token        the job attempt's lock token
  ARGV[4] owner        `runId/row`
  ARGV[5] leaseMs      the create lock's lease
  ARGV[6] markerTtlMs
  ARGV[7] crmClockMs   the CRM's clock now as the worker estimates it
  ARGV[8] measured     '1' when that estimate was measured (the marker's kind)
  ARGV[9] isUpsert     '1' when KEYS[6] is an upsert's match-key record (the lock is then the key's)
  Returns {'exists', dealId} (an upsert of the same key created it meanwhile: update it
  instead), {'send', marker} (marker set, lock taken: POST now), {'doubt', marker, now} (an
  earlier attempt of the row may have created the deal: resolve, do not POST; the lock is taken
  unless the marker already names the deal), {'wait', ms} (an identical create of another row
  is in flight, or its settle and lookup), {'has-result'} or {'refused', why}.
]]
local bucketKey, roundsKey, lockKey = KEYS[1], KEYS[2], KEYS[3]
local markersKey, createLock, upsertedKey = KEYS[4], KEYS[5], KEYS[6]
local row, round, token, owner = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local leaseMs, markerTtlMs = ARGV[5], ARGV[6]
local crmClockMs, measured, isUpsert = ARGV[7], ARGV[8], ARGV[9] == '1'
--- @include "includes/redis-clock"
--- @include "includes/create-marker"
--- @include "includes/send-fence"

local now = now_ms()
local marker = redis.call('HGET', markersKey, row)
local holder = redis.call('GET', createLock)
local sentField = sent_field(row)
if not marker then
  -- The marker's key expired (or was lost) while the row's send evidence, its copy beside the
  -- row's result, is still there: the marker is put back as it was.
  local evidence = redis.call('HGET', bucketKey, sentField)
  if evidence and parse_marker(evidence) then
    marker = evidence
    redis.call('HSET', markersKey, row, marker)
    redis.call('PEXPIRE', markersKey, markerTtlMs)
  end
end
if marker then
  -- A deal id in the marker is this row's own: record it whatever else is in flight.
  local m = parse_marker(marker)
  if not m or m.deal ~= '' then return {'doubt', marker, tostring(now)} end
  -- A lookup while an identical create of another row is on the wire could take that row's
  -- deal for this one's: wait for it, then look with the lock held.
  if holder and holder ~= owner then return {'wait', tostring(redis.call('PTTL', createLock))} end
  redis.call('SET', createLock, owner, 'PX', leaseMs)
  return {'doubt', marker, tostring(now)}
end
if isUpsert then
  local made = redis.call('GET', upsertedKey)
  if made then return {'exists', made} end
end
if holder and holder ~= owner then return {'wait', tostring(redis.call('PTTL', createLock))} end
redis.call('SET', createLock, owner, 'PX', leaseMs)
marker = format_marker(now, crmClockMs, measured, '')
redis.call('HSET', markersKey, row, marker)
redis.call('PEXPIRE', markersKey, markerTtlMs)
-- The evidence that outlives the marker's TTL: as long as the row's result (create-marker).
redis.call('HSET', bucketKey, sentField, marker)
return {'send', marker}
