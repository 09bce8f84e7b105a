--[[
  The attempt is over without a deal to record: the lock is released, and the marker and the
  send evidence beside the row's result removed (the POST was proved not applied) unless kept
  (an uncertain row keeps both for the next look, stamped with when it became uncertain) or no
  longer this attempt's (a newer attempt's are left alone).
  KEYS[1] markersKey  the run's create markers
  KEYS[2] createLock  the fingerprint's create lock
  KEYS[3] bucketKey   the row's result bucket (its send evidence, create-marker)
  ARGV[1] row
  ARGV[2] owner       `runId/row`
  ARGV[3] sentAt      the marker's sentAt
  ARGV[4] keep        '1' to keep the marker
]]
local markersKey, createLock, bucketKey = KEYS[1], KEYS[2], KEYS[3]
local row, owner, sentAt, keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
--- @include "includes/redis-clock"
--- @include "includes/create-marker"

local now = now_ms()
for _, at in ipairs({ { markersKey, row }, { bucketKey, sent_field(row) } }) do
  local m = parse_marker(redis.call('HGET', at[1], at[2]) or '')
  if m and m.sent == sentAt then
    if not keep then
      redis.call('HDEL', at[1], at[2])
    else
      -- Stamped so the next look waits for a pass begun after this one (its snapshot is stale).
      redis.call('HSET', at[1], at[2], format_marker(m.sent, m.clock, m.kind, '', now))
    end
  end
end
if redis.call('GET', createLock) == owner then redis.call('DEL', createLock) end
return 1
