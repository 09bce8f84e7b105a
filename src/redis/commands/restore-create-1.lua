--[[
  A row of a create run that ended in doubt and is retried must look for its deal before it
  sends anything: if its marker is gone (expired, or Redis lost it), one is put back with kind
  2, whose lookup takes no deal as its own (any candidate leaves it uncertain) but proves by
  finding none that nothing was made. Returns how many were put back.
  KEYS[1] markersKey   the run's create markers
  ARGV[1] markerTtlMs
  ARGV[2] since        a time before every send of these rows (the run's creation, Redis' clock ms)
  ARGV[3..] rows
]]
local markersKey = KEYS[1]
local markerTtlMs, since = ARGV[1], ARGV[2]
local FIRST_ROW = 3
--- @include "includes/create-marker"

local n = 0
for i = FIRST_ROW, #ARGV do
  n = n + redis.call('HSETNX', markersKey, ARGV[i], format_marker(since, since, '2', ''))
end
-- Only ever lengthened: workers set the life their retention gives on every marker.
if n > 0 and redis.call('PTTL', markersKey) < tonumber(markerTtlMs) then redis.call('PEXPIRE', markersKey, markerTtlMs) end
return n
