--[[
  May a row's update be sent (runs/row-fence.ts beginUpdate)? Order is per field: a field that
  a later, already-applied row wrote is not sent again (that would put an older value back);
  the row's other fields are. A lease that ran out counts as applied: its request may have
  reached the CRM.
  KEYS[1] bucketKey   the row's result bucket
  KEYS[2] roundsKey   the run's rows' retry rounds
  KEYS[3] lockKey     the job's BullMQ lock
  KEYS[4] orderKey    the record's write order (write-order)
  KEYS[5] tatKey      the workspace's request budget (claim-send-times), when a send time is claimed
  KEYS[6] rateKey     its learned rate
  KEYS[7] logKey      its send log
  ARGV[1] row
  ARGV[2] round       the row's retry round as its job knows it
  ARGV[3] token       the job attempt's lock token
  ARGV[4] seq         the row's place in write order
  ARGV[5] leaseMs     how long the row's write holds the record
  ARGV[6] windowMs    the ordering window
  ARGV[7] fields      JSON object: field -> its value as JSON text
  ARGV[8] required    JSON array: the fields a request may not leave out
  ARGV[9] interval    ARGV[9..18]: the row's send time, claimed once the fence lets it go, as
  ARGV[10] tolerance    claim-tokens' ARGV[1..10] name them; n = 0: none claimed (the row takes
  ARGV[11] n            its token from the budget's own call)
  ARGV[12] horizon
  ARGV[13] startRate
  ARGV[14] window
  ARGV[15] max
  ARGV[16] unused
  ARGV[17] lead
  ARGV[18] climbMs
  Returns {'send', written, claimed} (the row now holds the record's in-flight lease; `written` is
  a JSON object naming each field a later row wrote: {by = seq, v = that row's value when the
  field is required}; `claimed`: claim-tokens' reply as one space-separated string, '' when none
  was asked — a send time claimed in the same step, so a row at a Redis far away waits one round
  trip for both, and a row the fence refuses claims none), {'has-result'}, {'refused', why}, {'superseded', seq, written} when a later row
  wrote every field the row would send, or {'wait', ms} while another row's write to the record
  is on the wire.
]]
local bucketKey, roundsKey, lockKey, orderKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local row, round, token = ARGV[1], ARGV[2], ARGV[3]
local seq, lease_ms, window_ms = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local fieldsJson, requiredJson = ARGV[7], ARGV[8]
--- @include "includes/redis-clock"
--- @include "includes/write-order"
--- @include "includes/send-fence"
--- @include "includes/claim-send-times"

local fields, required = cjson.decode(fieldsJson), {}
for _, name in ipairs(cjson.decode(requiredJson)) do required[name] = true end
local now = now_ms()
local st = read_order(orderKey)
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
  if expired then write_order(orderKey, st, window_ms) end
  return {'superseded', last, cjson.encode(written)}
end
local sent = {}
for name, val in pairs(fields) do
  local w = written[name]
  if not w then sent[name] = val elseif w.v then sent[name] = w.v end
end
st.inflight = { s = seq, u = now + lease_ms, f = sent }
write_order(orderKey, st, window_ms)
local claimed = ''
if (tonumber(ARGV[11]) or 0) > 0 then
  claimed = table.concat(claim_send_times(KEYS[5], KEYS[6], KEYS[7], {
    interval = ARGV[9], tolerance = ARGV[10], n = ARGV[11], horizon = ARGV[12], startRate = ARGV[13],
    window = ARGV[14], max = ARGV[15], unused = ARGV[16], lead = ARGV[17], climbMs = ARGV[18],
  }), ' ')
end
return {'send', cjson.encode(written), claimed}
