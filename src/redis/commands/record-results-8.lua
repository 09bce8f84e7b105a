--[[
  Stores rows' results and moves the run's counts. A queued row's result is written once: a
  writer whose job attempt is stale, whose row was retried since, or whose row already has a
  result is refused (fencing; docs/architecture.md, "Delivery guarantees"). Each row may also
  settle the record's write order: that saves the update a script call of its own, and is done
  even for a refused result, because it records what the CRM holds, not the row's result.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  KEYS[6] resultsBase   the result buckets' common start (result-bucket)
  KEYS[7] problemsKey   the problems zset
  KEYS[8] roundsKey     rows' retry rounds hash
  ARGV[1] fromQueue     '1' when the rows came from the queue
  ARGV[2] now           ISO time
  ARGV[3] windowMs      the write-order window
  ARGV[4..] rows        groups of eight per row: row, encoded result (first character = status), the
          writer's job lock key ('' = none), its lock token, the row's retry round ('' = not
          checked), the record's order key ('' = no write to settle), the row's seq, '1' if applied
  Returns the counts in COUNTS order, then pairs of refused row and reason.
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local resultsBase, problemsKey, roundsKey = KEYS[6], KEYS[7], KEYS[8]
local fromQueue = ARGV[1] == '1'
local now = ARGV[2]
local windowMs = ARGV[3]
local FIRST_ROW, ROW_ARGS = 4, 8
--- @include "includes/run-status"
--- @include "includes/result-bucket"
--- @include "includes/row-results"
--- @include "includes/write-order"

local refused = {}
for i = FIRST_ROW, #ARGV, ROW_ARGS do
  local row, value = ARGV[i], ARGV[i + 1]
  local lockKey, token, round = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local orderKey, seq, applied = ARGV[i + 5], ARGV[i + 6], ARGV[i + 7] == '1'
  local why = nil
  if fromQueue then why = write_refused(row, lockKey, token, round, roundsKey) end
  if orderKey ~= '' then settle_order(orderKey, seq, applied, windowMs) end
  if why then
    refused[#refused + 1] = row
    refused[#refused + 1] = why
  else
    put_result(row, value, fromQueue, redis.call('HGET', bucket(row), row))
  end
end
flush_results(now)
local out = redis.call('HMGET', runKey, unpack(COUNTS))
for _, v in ipairs(refused) do out[#out + 1] = v end
return out
