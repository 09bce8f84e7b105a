--[[
  The attempt is over without a deal to record: the lock is released, and the marker removed
  unless kept (an uncertain row keeps it for the next look, stamped with when it became
  uncertain) or no longer this attempt's (a newer attempt's marker is left alone).
  KEYS[1] markersKey  the run's create markers
  KEYS[2] createLock  the fingerprint's create lock
  ARGV[1] row
  ARGV[2] owner       `runId/row`
  ARGV[3] sentAt      the marker's sentAt
  ARGV[4] keep        '1' to keep the marker
]]
local markersKey, createLock = KEYS[1], KEYS[2]
local row, owner, sentAt, keep = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
--- @include "includes/redis-clock"
--- @include "includes/create-marker"

local text = redis.call('HGET', markersKey, row)
local m = text and parse_marker(text)
if m and m.sent == sentAt then
  if not keep then
    redis.call('HDEL', markersKey, row)
  else
    -- Stamped so the next look waits for a pass begun after this one (its snapshot is stale).
    redis.call('HSET', markersKey, row, format_marker(m.sent, m.clock, m.kind, '', now_ms()))
  end
end
if redis.call('GET', createLock) == owner then redis.call('DEL', createLock) end
return 1
