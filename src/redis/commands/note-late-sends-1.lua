--[[
  Moves send times in a known limit's send log (rate/token-bucket.ts) to when their requests
  really left, for requests that left later than granted: a process held up between its token
  and the wire (a stalled event loop, a descheduled process, the HTTP client's own work). A later
  grant is held `window` after the one `max` grants before it (includes/claim-send-times.lua);
  held from the late send's real time, no window of later grants counts that send early.

  Only ever later: an entry whose stored time is already at or past the one given is left alone,
  and an entry no longer in the log (trimmed: `max` grants came since) changes nothing, since no
  grant still to come is checked against it.

  KEYS[1] logKey   the send log (oldest first)
  ARGV[1..] pairs  granted, sent: a send time as granted and when its request left, both on
                   Redis's clock (ms), for each late request
  Returns how many entries were moved.
]]
local logKey = KEYS[1]
local log = redis.call('LRANGE', logKey, 0, -1)
if #log == 0 then return 0 end
local moved, taken = 0, {}
for i = 1, #ARGV - 1, 2 do
  local granted, sent = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  for j = #log, 1, -1 do
    -- Grants are stored with 3 decimals; the process got them as offsets from Redis's now.
    local v = tonumber(log[j])
    if not taken[j] and math.abs(v - granted) < 0.01 then
      taken[j] = true
      if sent > v then
        redis.call('LSET', logKey, j - 1, string.format('%.3f', sent))
        moved = moved + 1
      end
      break
    end
  end
end
return moved
