--[[
  Takes a workspace off the work board (queue/work-board.ts) only if no one signalled since the
  caller read its count: a producer bumps the count after adding its jobs, so a settle that
  raced an enqueue fails and the workspace stays listed. Answers 1 when it was removed.
  KEYS[1] boardKey   the board (zset: workspace -> signal count)
  ARGV[1] workspace
  ARGV[2] seen       the count read before the caller found the queue empty
]]
local boardKey = KEYS[1]
local workspace, seen = ARGV[1], ARGV[2]

if redis.call('ZSCORE', boardKey, workspace) == seen then
  redis.call('ZREM', boardKey, workspace)
  return 1
end
return 0
