--[[
  A row of a create run that ended in doubt and is retried must look for its deal before it
  sends anything. A row whose send evidence is beside its result gets its marker back from that
  evidence when it is sent (begin-create); one with neither (a result an earlier version
  stored, or a Redis that lost both) gets one with kind 2, whose lookup takes no deal as its
  own (any candidate leaves it uncertain) but proves by finding none that nothing was made.
  Returns how many were put back.
  KEYS[1] markersKey   the run's create markers
  KEYS[2] resultsBase  the result buckets' common start (result-bucket)
  ARGV[1] markerTtlMs
  ARGV[2] since        a time before every send of these rows (the run's creation, Redis' clock ms)
  ARGV[3..] rows
]]
local markersKey, resultsBase = KEYS[1], KEYS[2]
local markerTtlMs, since = ARGV[1], ARGV[2]
local FIRST_ROW = 3
--- @include "includes/create-marker"
--- @include "includes/result-bucket"

local n = 0
for i = FIRST_ROW, #ARGV do
  local row = ARGV[i]
  if redis.call('HEXISTS', bucket(row), sent_field(row)) == 0 then
    n = n + redis.call('HSETNX', markersKey, row, format_marker(since, since, '2', ''))
  end
end
-- Only ever lengthened: workers set the life their retention gives on every marker.
if n > 0 and redis.call('PTTL', markersKey) < tonumber(markerTtlMs) then redis.call('PEXPIRE', markersKey, markerTtlMs) end
return n
