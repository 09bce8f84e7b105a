--[[
  After an uncertain answer the row keeps the create lock through the settle time, so an
  identical row waits for its lookup instead of creating a second deal meanwhile. Answers 0
  when another row holds the lock.
  With `sentAt`, the attempt's answer was just lost: its marker (if still this attempt's) is
  stamped now, so its lookup takes only a pass begun after the loss was seen — a CRM that
  applied the create did so before it dropped the answer, however late the request reached it,
  so such a pass lists the deal.
  The send evidence beside the row's result is stamped with it (create-marker).
  KEYS[1] createLock  the fingerprint's create lock
  KEYS[2] markersKey  the run's create markers
  KEYS[3] bucketKey   the row's result bucket (its send evidence)
  ARGV[1] owner       `runId/row`
  ARGV[2] ms          how long to hold it
  ARGV[3] row
  ARGV[4] sentAt      the marker's sentAt, or '' to leave the marker as it is
]]
local createLock, markersKey, bucketKey = KEYS[1], KEYS[2], KEYS[3]
local owner, ms, row, sentAt = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--- @include "includes/redis-clock"
--- @include "includes/create-marker"

local holder = redis.call('GET', createLock)
if holder and holder ~= owner then return 0 end
redis.call('SET', createLock, owner, 'PX', ms)
if sentAt ~= '' then
  local now = now_ms()
  for _, at in ipairs({ { markersKey, row }, { bucketKey, sent_field(row) } }) do
    local m = parse_marker(redis.call('HGET', at[1], at[2]) or '')
    if m and m.sent == sentAt then
      redis.call('HSET', at[1], at[2], format_marker(m.sent, m.clock, m.kind, m.deal, now))
    end
  end
end
return 1
