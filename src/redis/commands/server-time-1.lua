--[[
  Redis's clock in ms: run ids are stamped by the one clock every process shares.
  KEYS[1] workspaceKey  any key of the workspace: only routes the call to its node on a Cluster
]]
--- @include "includes/redis-clock"
return now_ms()
