--[[
  Redis's clock (TIME): the one clock every worker process shares, so leases, markers and
  send times agree across hosts whatever their own clocks say. A script may read TIME before
  it writes: Redis replicates a script's effects, not the script.
]]

-- Now in whole ms, rounded down (what markers, leases and run ids store).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Now in ms with the µs as a fraction (the token bucket paces requests less than a ms apart).
local function now_ms_exact()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
