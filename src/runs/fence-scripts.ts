import { LuaScript } from './lua-script.js';
import { BUCKET, COUNT_FIELDS, ORDER, PRELUDE, RESULTS } from './run-scripts.js';

/*
 * The write fence's scripts (row-fence.ts; docs/architecture.md, "Delivery guarantees").
 * Each decides in one atomic step whether a worker may send a row's request, or stores what
 * the answer proved, so that no interleaving of workers, redeliveries, retries and sweeps can
 * send a row twice over a stored result, put an older value over a newer one, or let two rows
 * record one deal.
 *
 * Clocks: leases and markers use Redis' TIME, the one clock every worker process shares.
 */

const NOW_MS = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/**
 * The checks every send passes first: the worker's job attempt is current (its BullMQ lock
 * still holds its token), the row is still in the job's retry round, and the row has no
 * result yet, and its run was not cancelled. Needs `row`, `round`, `token` and the keys
 * `bucket_key`, `rounds_key` (`<run key>:rounds`), `lock_key`.
 */
const SEND_FENCE = `
if redis.call('GET', lock_key) ~= token then return {'refused', 'lock'} end
if (redis.call('HGET', rounds_key, row) or '0') ~= round then return {'refused', 'round'} end
if redis.call('HEXISTS', bucket_key, row) == 1 then return {'has-result'} end
-- A cancelled run sends no more rows, whichever job holds them: the row is recorded cancelled.
-- The run's record and create markers are named from the rounds key (same hash tag), so the
-- KEYS the scripts share stay as they are. A create an earlier attempt may have applied (its
-- marker is left) still goes on to resolve that doubt.
local fence_run_key = string.sub(rounds_key, 1, -8)
if redis.call('HGET', fence_run_key, 'status') == 'cancelled'
  and redis.call('HEXISTS', fence_run_key .. ':creating', row) == 0 then return {'refused', 'cancelled'} end
`;

/**
 * KEYS[1] the row's result bucket, KEYS[2] rounds, KEYS[3] the job's lock key, KEYS[4] the
 * record's order key. ARGV[1] row, ARGV[2] round, ARGV[3] lock token, ARGV[4] the row's seq,
 * ARGV[5] lease ms, ARGV[6] ordering window ms, ARGV[7] the row's fields (JSON object: field →
 * its value as JSON text), ARGV[8] the fields a request may not leave out (JSON array).
 *
 * Order is per field: a field that a later, already-applied row wrote is not sent again (that
 * would put an older value back); the row's other fields are. Returns {'send', written} (the
 * row now holds the record's in-flight lease; `written` is a JSON object naming each field a
 * later row wrote: {by = seq, v = that row's value when the field is required}), {'has-result'},
 * {'refused', why}, {'superseded', seq, written} when a later row wrote every field the row
 * would send, or {'wait', ms} while another row's write to the record is on the wire. A lease
 * that ran out counts as applied: its request may have reached the CRM.
 */
export const BEGIN_UPDATE = new LuaScript(`${NOW_MS}
${ORDER}
local row, round, token = ARGV[1], ARGV[2], ARGV[3]
local bucket_key, rounds_key, lock_key = KEYS[1], KEYS[2], KEYS[3]
${SEND_FENCE}
local seq, lease_ms, window_ms = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local fields, required = cjson.decode(ARGV[7]), {}
for _, name in ipairs(cjson.decode(ARGV[8])) do required[name] = true end
local now = now_ms()
local st = read_order(KEYS[4])
local before = st.inflight
expire_inflight(st, now)
local expired = before ~= nil and st.inflight == nil
local n = 0
local function written_fields()
  local written, sending, last = {}, {}, ''
  for name, val in pairs(fields) do
    local by = field_seq(st, name)
    local f = st.fields[name]
    if by > seq and required[name] and f and f.s == by and f.v == val then
      -- The later row wrote the same value: sending it is the row's own, and changes nothing.
      by = ''
    end
    if by > seq then
      local entry = { by = by }
      if by > last then last = by end
      if required[name] then
        -- A required field is sent with the value the later row wrote, so it stays the latest.
        if f and f.s == by then entry.v = f.v else entry.v = val end
      end
      written[name] = entry
      n = n + 1
    elseif not required[name] then
      sending[#sending + 1] = name
    end
  end
  return written, sending, last
end
if st.inflight and st.inflight.s ~= seq then return {'wait', tostring(st.inflight.u - now)} end
local written, sending, last = written_fields()
if n > 0 and #sending == 0 then
  if expired then write_order(KEYS[4], st, window_ms) end
  return {'superseded', last, cjson.encode(written)}
end
local sent = {}
for name, val in pairs(fields) do
  local w = written[name]
  if not w then sent[name] = val elseif w.v then sent[name] = w.v end
end
st.inflight = { s = seq, u = now + lease_ms, f = sent }
write_order(KEYS[4], st, window_ms)
return {'send', cjson.encode(written)}
`);

/**
 * KEYS[1] the record's order key. ARGV[1] seq, ARGV[2] '1' when the write was applied (or may
 * have been), '0' when the answer proved it was not, ARGV[3] ordering window ms. Ends the
 * row's in-flight lease.
 */
export const SETTLE_UPDATE = new LuaScript(`${ORDER}
settle_order(KEYS[1], ARGV[1], ARGV[2] == '1', ARGV[3])
return 1
`);

/**
 * KEYS[1] the row's result bucket, KEYS[2] rounds, KEYS[3] the job's lock key, KEYS[4] the run's
 * create markers, KEYS[5] the fingerprint's create lock. ARGV[1] row, ARGV[2] round, ARGV[3]
 * lock token, ARGV[4] owner (`runId/row`), ARGV[5] lease ms, ARGV[6] marker ttl ms, ARGV[7] the
 * CRM's clock now as the worker estimates it (ms), ARGV[8] '1' when that estimate was measured,
 * ARGV[9] '1' when KEYS[6] is an upsert's match-key record (the lock is then the key's).
 *
 * Returns {'exists', dealId} (an upsert of the same key created it meanwhile: update it instead),
 * {'send', marker} (marker set, lock taken: POST now), {'doubt', marker, now} (an
 * earlier attempt of the row may have created the deal: resolve, do not POST; the lock is taken
 * unless the marker already names the deal), {'wait', ms} (an identical create of another row
 * is in flight, or its settle and lookup), {'has-result'} or {'refused', why}.
 * A marker is `sentAtMs|crmClockMs|kind|dealId|uncertainAtMs` (dealId empty until known;
 * uncertainAtMs set when the answer was lost or a lookup left the row uncertain: a later look
 * needs a pass begun after it).
 * `kind` 0/1: sentAtMs is this attempt's send (1: the CRM's Date header was known then); 2: a
 * marker `runs retry` put back for a row in doubt whose own had gone, and sentAtMs is only a
 * time before its send (RESTORE_CREATE).
 */
export const BEGIN_CREATE = new LuaScript(`${NOW_MS}
local row, round, token = ARGV[1], ARGV[2], ARGV[3]
local bucket_key, rounds_key, lock_key = KEYS[1], KEYS[2], KEYS[3]
${SEND_FENCE}
local now = now_ms()
local marker = redis.call('HGET', KEYS[4], row)
local holder = redis.call('GET', KEYS[5])
if marker then
  -- A deal id in the marker is this row's own: record it whatever else is in flight.
  if string.match(marker, '^[^|]*|[^|]*|[^|]*|([^|]*)') ~= '' then return {'doubt', marker, tostring(now)} end
  -- A lookup while an identical create of another row is on the wire could take that row's
  -- deal for this one's: wait for it, then look with the lock held.
  if holder and holder ~= ARGV[4] then return {'wait', tostring(redis.call('PTTL', KEYS[5]))} end
  redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
  return {'doubt', marker, tostring(now)}
end
if ARGV[9] == '1' then
  local made = redis.call('GET', KEYS[6])
  if made then return {'exists', made} end
end
if holder and holder ~= ARGV[4] then return {'wait', tostring(redis.call('PTTL', KEYS[5]))} end
redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
marker = now .. '|' .. ARGV[7] .. '|' .. ARGV[8] .. '|'
redis.call('HSET', KEYS[4], row, marker)
redis.call('PEXPIRE', KEYS[4], ARGV[6])
return {'send', marker}
`);

/**
 * The create's outcome, the deal's claim, the marker's removal and the row's result, in one
 * step. KEYS[1..7] as RECORD_RESULTS (run, status indexes, results base, problems), KEYS[8]
 * rounds, KEYS[9] the job's lock key, KEYS[10] create markers, KEYS[11] the create lock,
 * KEYS[12] the deal's claim. ARGV[1] now (ISO), ARGV[2] row, ARGV[3] round, ARGV[4] token,
 * ARGV[5] owner, ARGV[6] deal id, ARGV[7] encoded success, ARGV[8] encoded conflict (failed),
 * ARGV[9] claim ttl ms, ARGV[10] the sentAt of the marker this attempt set ('' if none), ARGV[11]
 * '1' when KEYS[13] is an upsert's match-key record, which then names the deal. KEYS[14] the
 * workspace's record clock; ARGV[12] the deal's created_at (ms) when the CRM answered this
 * attempt's POST ('' otherwise), ARGV[13] the resolution of that stamp (ms), ARGV[14] the
 * record clock's ttl ms.
 *
 * An answered create calibrates the clock that stamps the CRM's records: the deal was stamped
 * after the marker's sentAt and before now (both Redis' clock, whole ms), so created_at minus the
 * Redis clock lies in [created_at - now - 1, created_at + resolution - sentAt]. The record clock keeps the
 * intersection of such intervals (`lo|hi|atMs|resolution`), each widened by RECORD_CLOCK_DRIFT
 * of its age; a sample outside it (a clock that stepped) or an old calibration
 * (RECORD_CLOCK_FRESH_MS) starts it again from the sample.
 *
 * Returns {'recorded'}, {'conflict', owner of the claim} (another row had recorded this deal:
 * the row fails, nothing is overwritten), or {'refused', why}. A refused writer whose lock is
 * gone still leaves the deal id in the row's marker, so the row's new owner records that deal
 * instead of creating another.
 */
/** A record clock calibrated longer ago than this starts again from the next sample. */
export const RECORD_CLOCK_FRESH_MS = 7 * 86_400_000;
/** How far two clocks may drift apart, as a share of the time since they were compared (100 ppm). */
export const RECORD_CLOCK_DRIFT = 0.0001;

export const FINISH_CREATE = new LuaScript(`${PRELUDE}
${BUCKET}
${COUNT_FIELDS}
${RESULTS}
local row, owner, deal = ARGV[2], ARGV[5], ARGV[6]
local holder = redis.call('GET', KEYS[12])
local why = write_refused(row, KEYS[9], ARGV[4], ARGV[3], KEYS[8])
if why then
  local m = redis.call('HGET', KEYS[10], row)
  if why == 'lock' and m and (not holder or holder == owner) then
    local s, c, k = string.match(m, '^(%d+)|(%-?%d+)|(%d)|')
    if s and (ARGV[10] == '' or s == ARGV[10]) then
      redis.call('HSET', KEYS[10], row, s .. '|' .. c .. '|' .. k .. '|' .. deal)
    end
  end
  return {'refused', why}
end
local answer
if holder and holder ~= owner then
  put_result(row, ARGV[8], true, nil)
  answer = {'conflict', holder}
else
  redis.call('SET', KEYS[12], owner, 'PX', ARGV[9])
  if ARGV[11] == '1' then redis.call('SET', KEYS[13], deal, 'PX', ARGV[9]) end
  put_result(row, ARGV[7], true, nil)
  answer = {'recorded'}
  if ARGV[12] ~= '' and ARGV[10] ~= '' then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local c, res = tonumber(ARGV[12]), tonumber(ARGV[13])
    -- TIME and the marker's sentAt are whole ms rounded down: now may be 1 ms short of the truth.
    local lo, hi = c - now - 1, c + res - tonumber(ARGV[10])
    local cur = redis.call('GET', KEYS[14])
    if cur then
      local clo, chi, cat, cres = string.match(cur, '^(%-?%d+)|(%-?%d+)|(%d+)|(%d+)$')
      clo, chi, cat, cres = tonumber(clo), tonumber(chi), tonumber(cat), tonumber(cres)
      if clo and now - cat < ${RECORD_CLOCK_FRESH_MS} then
        -- The stored bounds hold as they were when taken: clocks drift apart since.
        local drift = math.floor((now - cat) * ${RECORD_CLOCK_DRIFT})
        clo, chi = clo - drift, chi + drift
        if math.max(lo, clo) <= math.min(hi, chi) then
          lo, hi, res = math.max(lo, clo), math.min(hi, chi), math.max(res, cres)
        end
      end
    end
    redis.call('SET', KEYS[14], lo .. '|' .. hi .. '|' .. now .. '|' .. res, 'PX', ARGV[14])
  end
end
redis.call('HDEL', KEYS[10], row)
if redis.call('GET', KEYS[11]) == owner then redis.call('DEL', KEYS[11]) end
flush_results(ARGV[1])
return answer
`);

/**
 * KEYS[1] create markers, KEYS[2] the create lock. ARGV[1] row, ARGV[2] owner, ARGV[3] the
 * marker's sentAt, ARGV[4] '1' to keep the marker. The attempt is over without a deal to
 * record: the lock is released, and the marker removed unless kept (an uncertain row keeps it
 * for the next look, stamped with when it became uncertain) or no longer this attempt's (a newer
 * attempt's marker is left alone).
 */
export const RELEASE_CREATE = new LuaScript(`${NOW_MS}
local m = redis.call('HGET', KEYS[1], ARGV[1])
if m and string.match(m, '^(%d+)|') == ARGV[3] then
  if ARGV[4] ~= '1' then
    redis.call('HDEL', KEYS[1], ARGV[1])
  else
    -- Stamped so the next look waits for a pass begun after this one (its snapshot is stale).
    local s, c, k = string.match(m, '^(%d+)|(%-?%d+)|(%d)|')
    redis.call('HSET', KEYS[1], ARGV[1], s .. '|' .. c .. '|' .. k .. '||' .. now_ms())
  end
end
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
return 1
`);

/**
 * KEYS[1] the create lock, KEYS[2] create markers. ARGV[1] owner, ARGV[2] ms, ARGV[3] row,
 * ARGV[4] the marker's sentAt ('' to leave the marker as it is). After an uncertain answer the
 * row keeps the lock through the settle time, so an identical row waits for its lookup instead
 * of creating a second deal meanwhile. With ARGV[4] the answer was just lost: the marker (if
 * still this attempt's) is stamped now, so its lookup takes only a pass begun after the loss was
 * seen — a CRM that applied the create did so before it dropped the answer, however late the
 * request reached it, so such a pass lists the deal.
 */
export const HOLD_CREATE = new LuaScript(`${NOW_MS}
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] ~= '' then
  local m = redis.call('HGET', KEYS[2], ARGV[3])
  if m and string.match(m, '^(%d+)|') == ARGV[4] then
    local s, c, k, d = string.match(m, '^(%d+)|(%-?%d+)|(%d)|([^|]*)')
    redis.call('HSET', KEYS[2], ARGV[3], s .. '|' .. c .. '|' .. k .. '|' .. d .. '|' .. now_ms())
  end
end
return 1
`);

/**
 * KEYS[1] create markers. ARGV[1] marker ttl ms, ARGV[2] the time before every send of these
 * rows (the run's creation, Redis' clock ms), ARGV[3..] rows. A row of a create run that ended
 * in doubt and is retried must look for its deal before it sends anything: if its marker is
 * gone (expired, or Redis lost it), one is put back with kind 2, whose lookup takes no deal
 * as its own (any candidate leaves it uncertain) but proves by finding none that nothing was
 * made. Returns how many were put back.
 */
export const RESTORE_CREATE = new LuaScript(`
local n = 0
for i = 3, #ARGV do
  n = n + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[2] .. '|' .. ARGV[2] .. '|2|')
end
-- Only ever lengthened: workers set the life their retention gives on every marker.
if n > 0 and redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
`);
