import { LuaScript } from './lua-script.js';
import { RESULT_BUCKET_ROWS } from '../keys/index.js';

/*
 * Every script gets KEYS[1] = the run hash and KEYS[2..5] = the status indexes (running,
 * blocked, completed, failed; cancelled is derived), so a status change and its index move happen in the same
 * atomic step as the counts that caused it. Scripts answer `RUN_NOT_FOUND` as an error reply
 * when the run hash is gone; the store turns that into a CrmSyncError.
 */
export const PRELUDE = `
local run = KEYS[1]
if redis.call('EXISTS', run) == 0 then return redis.error_reply('RUN_NOT_FOUND no such run') end
-- The cancelled index is <prefix>:runs:status:cancelled, derived from the running one (run-keys.ts).
local STATUS_INDEX = { running = KEYS[2], blocked = KEYS[3], completed = KEYS[4], failed = KEYS[5], cancelled = string.sub(KEYS[2], 1, -8) .. 'cancelled' }
local ENDED = { completed = true, failed = true, cancelled = true }

-- Moves the run to a status, keeping the status index, finishedAt and reason in step.
local function set_status(status, now, reason)
  local current = redis.call('HMGET', run, 'status', 'id', 'createdMs')
  if current[1] ~= status then
    if current[1] and STATUS_INDEX[current[1]] then redis.call('ZREM', STATUS_INDEX[current[1]], current[2]) end
    redis.call('ZADD', STATUS_INDEX[status], current[3], current[2])
    redis.call('HSET', run, 'status', status)
  end
  if ENDED[status] then
    redis.call('HSET', run, 'finishedAt', now)
    -- Kept once: retries move finishedAt, the first pass's end stays (the run's own duration).
    redis.call('HSETNX', run, 'firstFinishedAt', now)
  else
    redis.call('HDEL', run, 'finishedAt')
  end
  if reason and reason ~= '' then
    redis.call('HSET', run, 'reason', reason)
  else
    redis.call('HDEL', run, 'reason')
  end
end

-- A running run whose producer is done and whose queue share is empty is complete.
local function complete_if_done(now)
  local f = redis.call('HMGET', run, 'status', 'producerDone', 'queued')
  if f[1] == 'running' and f[2] == '1' and tonumber(f[3]) == 0 then
    set_status('completed', now, nil)
  end
end
`;

// Result buckets are derived from the row inside the script (one key per 100 rows cannot be
// listed in KEYS up front). Fine on a single Redis; on Cluster they would need a {run} hash tag.
export const BUCKET = `
local function bucket(row)
  return KEYS[6] .. ':' .. math.floor(tonumber(row) / ${RESULT_BUCKET_ROWS})
end
`;

export const COUNT_FIELDS = `local COUNTS = { 'total', 'queued', 'succeeded', 'failed', 'skipped', 'invalid', 'superseded', 'uncertain', 'cancelled' }`;

/*
 * Storing one row's result, shared by every script that records one (RECORD_RESULTS, and the
 * create's FINISH_CREATE in fence-scripts.ts), so counts, the problems index and maxRow move
 * the same way whichever path wrote the row. Needs BUCKET; KEYS[7] is the problems zset.
 */
export const RESULTS = `
local NAMES = { s = 'succeeded', k = 'skipped', i = 'invalid', f = 'failed', p = 'superseded', u = 'uncertain', c = 'cancelled' }
local PROBLEM = { failed = true, invalid = true, uncertain = true, cancelled = true }
local delta = { total = 0, queued = 0, succeeded = 0, failed = 0, skipped = 0, invalid = 0, superseded = 0, uncertain = 0, cancelled = 0 }
local max_row = tonumber(redis.call('HGET', run, 'maxRow') or '0')

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
    redis.call('ZADD', KEYS[7], row, row)
  else
    redis.call('ZREM', KEYS[7], row)
  end
  local r = tonumber(row)
  if r > max_row then max_row = r end
end

local function flush_results(now)
  for _, field in ipairs(COUNTS) do
    if delta[field] ~= 0 then redis.call('HINCRBY', run, field, delta[field]) end
  end
  redis.call('HSET', run, 'maxRow', max_row)
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
`;

/*
 * A record's write order, per field (docs/architecture.md, "Write order of a record"). The
 * record's order key is a hash:
 *   `f:<field>` = `<seq>|<value as JSON>`: the last row applied to the record that wrote this
 *                 field, and the value it wrote (a required field a row may not leave out is
 *                 sent with it when an older row goes later);
 *   `~`         = cjson `{s = seq, u = until ms, f = {field = value JSON}}`: the write on the
 *                 wire, whose lease ends at `u`;
 *   `*`         = a seq that wrote every field: what a record's order of an earlier version
 *                 (one string, `applied[|inflight|untilMs]`, ordered per record) is read as.
 * Sequences are fixed-width strings that sort in row order (row-fence.ts: seqOf).
 */
export const ORDER = `
-- What a script changes is written back alone (write_order): \`dirty\` names the fields, \`read\`
-- is the in-flight entry as read (a different table, or nil, means it changed).
local function read_order(key)
  local st = { fields = {}, star = '', inflight = nil, dirty = {}, kind = 'none' }
  local kind = redis.call('TYPE', key).ok
  st.kind = kind
  if kind == 'string' then
    local v = redis.call('GET', key)
    local a, i, u = string.match(v, '^([^|]*)|([^|]*)|(%d+)$')
    if a then
      st.star = a
      st.inflight = { s = i, u = tonumber(u) }
    else
      st.star = v
    end
    return st
  end
  if kind ~= 'hash' then return st end
  local all = redis.call('HGETALL', key)
  for n = 1, #all, 2 do
    local name, v = all[n], all[n + 1]
    if name == '~' then
      st.inflight = cjson.decode(v)
    elseif name == '*' then
      st.star = v
    else
      local s, val = string.match(v, '^([^|]*)|(.*)$')
      st.fields[string.sub(name, 3)] = { s = s, v = val }
    end
  end
  st.read = st.inflight
  return st
end

-- The seq of the last applied row that wrote the field ('' = none in the window).
local function field_seq(st, name)
  local f = st.fields[name]
  if f and f.s > st.star then return f.s end
  return st.star
end

-- A write (seq, its fields) counts as applied: each field it wrote remembers it, unless a later
-- row's write of that field already counts. No fields: an earlier version's write of every field.
local function apply_write(st, seq, fields)
  if not fields then
    if seq > st.star then
      st.star = seq
      st.dirty['*'] = true
    end
    return
  end
  for name, val in pairs(fields) do
    if seq > field_seq(st, name) then
      st.fields[name] = { s = seq, v = val }
      st.dirty[name] = true
    end
  end
end

local function write_order(key, st, window_ms)
  -- An earlier version's string is rewritten whole as a hash; a hash gets only what changed.
  local whole = st.kind ~= 'hash'
  if st.kind == 'string' then redis.call('DEL', key) end
  local out = {}
  for name, f in pairs(st.fields) do
    if whole or st.dirty[name] then
      out[#out + 1] = 'f:' .. name
      out[#out + 1] = f.s .. '|' .. f.v
    end
  end
  if st.star ~= '' and (whole or st.dirty['*']) then
    out[#out + 1] = '*'
    out[#out + 1] = st.star
  end
  local moved = whole or st.inflight ~= st.read
  if st.inflight and moved then
    out[#out + 1] = '~'
    out[#out + 1] = cjson.encode(st.inflight)
  elseif moved and not whole then
    redis.call('HDEL', key, '~')
  end
  if #out > 0 then redis.call('HSET', key, unpack(out)) end
  if #out > 0 or moved then redis.call('PEXPIRE', key, window_ms) end
end

-- A write on the wire whose lease ran out counts as applied: its request may still land.
local function expire_inflight(st, now)
  if st.inflight and st.inflight.u <= now then
    apply_write(st, st.inflight.s, st.inflight.f)
    st.inflight = nil
  end
end

-- A row's write to the record is over: applied (or possibly), its fields remember it unless a
-- later row's write of the same field already counts; its in-flight lease, if still its own,
-- ends. A lease no longer its own ran out and was counted as applied when it did.
local function settle_order(key, seq, applied_now, window_ms)
  local st = read_order(key)
  if st.inflight and st.inflight.s == seq then
    if applied_now then apply_write(st, seq, st.inflight.f) end
    st.inflight = nil
    write_order(key, st, window_ms)
  end
end
`;

/**
 * KEYS[6] results bucket base, KEYS[7] problems zset, KEYS[8] rows' retry rounds hash.
 * ARGV[1] '1' when the rows came from the queue, ARGV[2] now (ISO), ARGV[3] the write-order
 * window (ms), then groups of eight: row, encoded result (first character = status), the
 * writer's job lock key ('' = none), its lock token, the row's retry round ('' = not checked),
 * and the write it settles: the record's order key ('' = none), the row's seq, '1' if applied.
 * Settling the record's write order here saves the update a script call of its own; it is
 * done even for a refused result, because it records what the CRM holds, not the row's result.
 *
 * A queued row's result is written once: a writer whose job attempt is stale, whose row was
 * retried since, or whose row already has a result is refused (fencing; docs/architecture.md,
 * "Delivery guarantees"). Returns the counts in COUNTS order, then pairs of refused row and
 * reason.
 */
export const RECORD_RESULTS = new LuaScript(`${PRELUDE}
${BUCKET}
${COUNT_FIELDS}
${RESULTS}
${ORDER}
local from_queue = ARGV[1] == '1'
local refused = {}
for i = 4, #ARGV, 8 do
  local row = ARGV[i]
  local why = nil
  if from_queue then why = write_refused(row, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], KEYS[8]) end
  if ARGV[i + 5] ~= '' then settle_order(ARGV[i + 5], ARGV[i + 6], ARGV[i + 7] == '1', ARGV[3]) end
  if why then
    refused[#refused + 1] = row
    refused[#refused + 1] = why
  else
    put_result(row, ARGV[i + 1], from_queue, redis.call('HGET', bucket(row), row))
  end
end
flush_results(ARGV[2])
local out = redis.call('HMGET', run, unpack(COUNTS))
for _, v in ipairs(refused) do out[#out + 1] = v end
return out
`);

/**
 * ARGV[1] count, ARGV[2] the highest row among them ('' = not tracked). Rows handed to the
 * queue. With a row, a producer that repeats a step after losing Redis's answer counts it once,
 * and `producedRow` says how far a producer got (where a resumed one goes on). Answers -1 and
 * counts nothing once the run is cancelled: the producer then queues no more rows.
 */
export const ADD_QUEUED = new LuaScript(`${PRELUDE}
if redis.call('HGET', run, 'status') == 'cancelled' then return -1 end
if ARGV[2] ~= '' then
  if tonumber(ARGV[2]) <= tonumber(redis.call('HGET', run, 'producedRow') or '0') then return 0 end
  redis.call('HSET', run, 'producedRow', ARGV[2])
end
redis.call('HINCRBY', run, 'total', ARGV[1])
redis.call('HINCRBY', run, 'queued', ARGV[1])
return 1
`);

/** ARGV[1] now (ISO). */
export const FINISH_PRODUCING = new LuaScript(`${PRELUDE}
redis.call('HSET', run, 'producerDone', '1')
complete_if_done(ARGV[1])
return 1
`);

/** ARGV[1] now (ISO). The producer is alive (a heartbeat); answers the run's status. */
export const TOUCH_PRODUCER = new LuaScript(`${PRELUDE}
redis.call('HSET', run, 'producerSeenAt', ARGV[1])
return redis.call('HGET', run, 'status')
`);

/**
 * ARGV[1] now (ISO), ARGV[2] reason. A running or blocked run becomes cancelled; answers 1 when
 * it did, 0 for a run that had already ended. Rows recorded afterwards (in flight at the cancel)
 * still count, but never complete the run (complete_if_done moves only running runs).
 */
export const CANCEL_RUN = new LuaScript(`${PRELUDE}
local status = redis.call('HGET', run, 'status')
if status ~= 'running' and status ~= 'blocked' then return 0 end
set_status('cancelled', ARGV[1], ARGV[2])
return 1
`);

/**
 * ARGV[1] now (ISO), ARGV[2] oldest acceptable producerSeenAt (ISO), ARGV[3] reason. A run still
 * reading its source whose producer went silent is failed; returns 1 when it was.
 */
export const FAIL_IF_PRODUCER_GONE = new LuaScript(`${PRELUDE}
local f = redis.call('HMGET', run, 'status', 'producerDone', 'producerSeenAt', 'createdAt', 'sourceRead')
if (f[1] ~= 'running' and f[1] ~= 'blocked') or f[2] == '1' then return 0 end
local seen = f[3] or f[4]
if seen >= ARGV[2] then return 0 end
if f[5] == '1' then
  -- Every row was queued or recorded before the producer died: it only missed saying so.
  redis.call('HSET', run, 'producerDone', '1')
  complete_if_done(ARGV[1])
  return 2
end
set_status('failed', ARGV[1], ARGV[3])
return 1
`);

/**
 * ARGV[1] the source's columns (JSON). The producer queued or recorded the source's last row:
 * a run whose producer dies after this is finished by the sweep, not failed.
 */
export const SOURCE_READ = new LuaScript(`${PRELUDE}
redis.call('HSET', run, 'sourceRead', '1', 'columns', ARGV[1])
return 1
`);

/**
 * ARGV[1] now (ISO), ARGV[2] ms the pass before took ('' when it had not ended). A retry or
 * resume is producing again: the run must not complete between its chunks; a new pass begins.
 */
export const BEGIN_PRODUCING = new LuaScript(`${PRELUDE}
redis.call('HSET', run, 'producerDone', '0', 'sourceRead', '0', 'producerSeenAt', ARGV[1], 'passStartedAt', ARGV[1])
redis.call('HINCRBY', run, 'passes', 1)
if ARGV[2] ~= '' then redis.call('HINCRBY', run, 'activeMs', ARGV[2]) end
set_status('running', ARGV[1], nil)
return 1
`);

/** ARGV[1] now (ISO), ARGV[2] reason. Only a running run can be blocked; returns 1 when it was. */
export const BLOCK_RUN = new LuaScript(`${PRELUDE}
if redis.call('HGET', run, 'status') ~= 'running' then return 0 end
set_status('blocked', ARGV[1], ARGV[2])
return 1
`);

/**
 * ARGV[1] now (ISO). Only a blocked run resumes; if its last rows finished while it was
 * blocked, it completes now instead of waiting for results that will never come.
 */
export const RESUME_RUN = new LuaScript(`${PRELUDE}
if redis.call('HGET', run, 'status') ~= 'blocked' then return 0 end
set_status('running', ARGV[1], nil)
complete_if_done(ARGV[1])
return 1
`);

/** ARGV[1] status, ARGV[2] now (ISO), ARGV[3] reason ('' = none). */
export const SET_STATUS = new LuaScript(`${PRELUDE}
set_status(ARGV[1], ARGV[2], ARGV[3])
return 1
`);

/**
 * KEYS[6] results bucket base, KEYS[7] problems zset, KEYS[8] rows' retry rounds hash.
 * ARGV[1] now (ISO), ARGV[2] the retry's round (its job generation), ARGV[3] '1' to take also
 * rows an earlier retry did not send because a later run had written them (superseded, code
 * ROW_WRITTEN_LATER: a resend), then row numbers.
 * Failed, invalid, uncertain and cancelled rows among them lose their result, count as queued again and
 * take the new round, so only the retry's job may send them or record their result (an older
 * job of the row, or the sweep acting for one, is refused); the run goes back to running when
 * any row moved. Returns pairs of row and the removed encoded result, so the caller still has
 * the original values to re-enqueue.
 */
export const REQUEUE_ROWS = new LuaScript(`${PRELUDE}
${BUCKET}
local NAMES = { i = 'invalid', f = 'failed', u = 'uncertain', c = 'cancelled' }
local moved = {}
local queued = 0
for i = 4, #ARGV do
  local row = ARGV[i]
  local results = bucket(row)
  local previous = redis.call('HGET', results, row)
  local p = previous and NAMES[string.sub(previous, 1, 1)]
  if previous and ARGV[3] == '1' and string.sub(previous, 1, 1) == 'p'
    and string.find(previous, '"c":"ROW_WRITTEN_LATER"', 1, true) then
    p = 'superseded'
  end
  if p then
    redis.call('HDEL', results, row)
    redis.call('ZREM', KEYS[7], row)
    redis.call('HINCRBY', run, p, -1)
    redis.call('HSET', KEYS[8], row, ARGV[2])
    queued = queued + 1
    moved[#moved + 1] = row
    moved[#moved + 1] = previous
  end
end
if queued > 0 then
  redis.call('HINCRBY', run, 'queued', queued)
  -- A cancelled run stays cancelled: a retry reopens it first (BEGIN_PRODUCING), so rows a
  -- retry still takes after a cancel are recorded cancelled by its producer.
  if redis.call('HGET', run, 'status') ~= 'cancelled' then set_status('running', ARGV[1], nil) end
end
return moved
`);
