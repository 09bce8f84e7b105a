--[[
  The create's outcome, the deal's claim, the marker's and the send evidence's removal and the
  row's result, in one step (runs/row-fence.ts finishCreate). A refused writer whose lock is gone
  still leaves the deal id in the row's marker and send evidence, so the row's new owner records
  that deal instead of creating another.

  An answered create calibrates the clock that stamps the CRM's records: the deal was stamped
  after the marker's sentAt and before now (both Redis' clock, whole ms), so created_at minus
  the Redis clock lies in [created_at - now - 1, created_at + resolution - sentAt]. The record
  clock keeps the intersection of such intervals (`lo|hi|atMs|resolution`), each widened by
  RECORD_CLOCK_DRIFT of its age. A sample past its upper bound is a stamp run ahead (a CRM that
  keeps stamps strictly increasing runs ahead in a burst; one of several servers stamps with
  several clocks) or a clock that stepped forward: it gives the upper bound its own, and the
  lower bound stays, for a stamp run ahead must not lift the bound below which a deal counts as
  made before a send — that would hide a lost create's own deal from its lookup, and the row
  would be sent again. A sample below the lower bound (a clock that stepped back) or an old
  calibration (RECORD_CLOCK_FRESH_MS) starts it again from the sample. Both constants are set by
  the loader from runs/fence-scripts.ts.

  KEYS[1] runKey         the run hash
  KEYS[2] runningKey     the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  KEYS[6] resultsBase    the result buckets' common start (result-bucket; the send evidence too)
  KEYS[7] problemsKey    the problems zset
  KEYS[8] roundsKey      rows' retry rounds
  KEYS[9] lockKey        the job's BullMQ lock
  KEYS[10] markersKey    the run's create markers
  KEYS[11] createLock    the fingerprint's create lock
  KEYS[12] claimKey      the deal's claim
  KEYS[13] upsertedKey   an upsert's match-key record (written only when isUpsert)
  KEYS[14] recordClock   the workspace's record clock
  ARGV[1] now            ISO time
  ARGV[2] row
  ARGV[3] round
  ARGV[4] token
  ARGV[5] owner          `runId/row`
  ARGV[6] deal           the deal id
  ARGV[7] success        encoded result when the deal is the row's
  ARGV[8] conflict       encoded result (uncertain) when another row had recorded the deal
  ARGV[9] claimTtlMs
  ARGV[10] sentAt        the sentAt of the marker this attempt set ('' if none)
  ARGV[11] isUpsert      '1' when upsertedKey then names the deal
  ARGV[12] createdAt     the deal's created_at (ms) when the CRM answered this attempt's POST ('')
  ARGV[13] resolutionMs  the resolution of that stamp
  ARGV[14] clockTtlMs    the record clock's ttl
  Returns {'recorded'}, {'conflict', owner of the claim} (another row had recorded this deal:
  the row is in doubt, nothing is overwritten), or {'refused', why}.
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local resultsBase, problemsKey, roundsKey, lockKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local markersKey, createLock, claimKey, upsertedKey, recordClock = KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14]
local nowIso, row, round, token, owner, deal = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local success, conflict, claimTtlMs, sentAt = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local isUpsert, createdAt, resolutionMs, clockTtlMs = ARGV[11] == '1', ARGV[12], ARGV[13], ARGV[14]
--- @include "includes/run-status"
--- @include "includes/result-bucket"
--- @include "includes/row-results"
--- @include "includes/redis-clock"
--- @include "includes/create-marker"

-- Narrows the record clock by this create's sample (see above).
local function calibrate()
  local now = now_ms()
  local c, res = tonumber(createdAt), tonumber(resolutionMs)
  -- TIME and the marker's sentAt are whole ms rounded down: now may be 1 ms short of the truth.
  local lo, hi = c - now - 1, c + res - tonumber(sentAt)
  local cur = redis.call('GET', recordClock)
  if cur then
    local clo, chi, cat, cres = string.match(cur, '^(%-?%d+)|(%-?%d+)|(%d+)|(%d+)$')
    clo, chi, cat, cres = tonumber(clo), tonumber(chi), tonumber(cat), tonumber(cres)
    if clo and now - cat < RECORD_CLOCK_FRESH_MS then
      -- The stored bounds hold as they were when taken: clocks drift apart since.
      local drift = math.floor((now - cat) * RECORD_CLOCK_DRIFT)
      clo, chi = clo - drift, chi + drift
      if lo > chi then
        lo, res = clo, math.max(res, cres)
      elseif hi >= clo then
        lo, hi, res = math.max(lo, clo), math.min(hi, chi), math.max(res, cres)
      end
    end
  end
  redis.call('SET', recordClock, lo .. '|' .. hi .. '|' .. now .. '|' .. res, 'PX', clockTtlMs)
end

local holder = redis.call('GET', claimKey)
local why = write_refused(row, lockKey, token, round, roundsKey)
local sentKey, sentField = bucket(row), sent_field(row)
if why then
  if why == 'lock' and (not holder or holder == owner) then
    -- The marker, and the send evidence that outlives it, learn the deal.
    for _, at in ipairs({ { markersKey, row }, { sentKey, sentField } }) do
      local m = parse_marker(redis.call('HGET', at[1], at[2]) or '')
      if m and (sentAt == '' or m.sent == sentAt) then
        redis.call('HSET', at[1], at[2], format_marker(m.sent, m.clock, m.kind, deal))
      end
    end
  end
  return {'refused', why}
end
local answer
if holder and holder ~= owner then
  put_result(row, conflict, true, nil)
  answer = {'conflict', holder}
else
  redis.call('SET', claimKey, owner, 'PX', claimTtlMs)
  if isUpsert then redis.call('SET', upsertedKey, deal, 'PX', claimTtlMs) end
  put_result(row, success, true, nil)
  answer = {'recorded'}
  if createdAt ~= '' and sentAt ~= '' then calibrate() end
end
redis.call('HDEL', markersKey, row)
-- The send evidence goes with the doubt: kept only when the row ends uncertain (the deal it
-- found was recorded by another row meanwhile), for `runs retry` to look from.
if answer[1] == 'recorded' or string.sub(conflict, 1, 1) ~= 'u' then redis.call('HDEL', sentKey, sentField) end
if redis.call('GET', createLock) == owner then redis.call('DEL', createLock) end
flush_results(nowIso)
return answer
