--[[
  A retry takes rows back. Failed, invalid, uncertain and cancelled rows among them lose their
  result, count as queued again and take the new round, so only the retry's job may send them
  or record their result (an older job of the row, or the sweep acting for one, is refused);
  the run goes back to running when any row moved. Returns pairs of row and the removed encoded
  result, so the caller still has the original values to re-enqueue.
  KEYS[1] runKey        the run hash
  KEYS[2] runningKey    the workspace's status indexes (the cancelled one is derived: run-status)
  KEYS[3] blockedKey
  KEYS[4] completedKey
  KEYS[5] failedKey
  KEYS[6] resultsBase   the result buckets' common start (result-bucket)
  KEYS[7] problemsKey   the problems zset
  KEYS[8] roundsKey     rows' retry rounds hash
  ARGV[1] now           ISO time
  ARGV[2] round         the retry's round (its job generation)
  ARGV[3] resend        '1' to take also rows an earlier retry did not send because a later
                        run had written them (superseded, code ROW_WRITTEN_LATER: a resend)
  ARGV[4..] rows        the row numbers
]]
local runKey = KEYS[1]
local runningKey, blockedKey, completedKey, failedKey = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local resultsBase, problemsKey, roundsKey = KEYS[6], KEYS[7], KEYS[8]
local now, round, resend = ARGV[1], ARGV[2], ARGV[3] == '1'
local FIRST_ROW = 4
--- @include "includes/run-status"
--- @include "includes/result-bucket"

local NAMES = { i = 'invalid', f = 'failed', u = 'uncertain', c = 'cancelled' }
local moved = {}
local queued = 0
for i = FIRST_ROW, #ARGV do
  local row = ARGV[i]
  local results = bucket(row)
  local previous = redis.call('HGET', results, row)
  local p = previous and NAMES[string.sub(previous, 1, 1)]
  if previous and resend and string.sub(previous, 1, 1) == 'p'
    and string.find(previous, '"c":"ROW_WRITTEN_LATER"', 1, true) then
    p = 'superseded'
  end
  if p then
    redis.call('HDEL', results, row)
    redis.call('ZREM', problemsKey, row)
    redis.call('HINCRBY', runKey, p, -1)
    redis.call('HSET', roundsKey, row, round)
    queued = queued + 1
    moved[#moved + 1] = row
    moved[#moved + 1] = previous
  end
end
if queued > 0 then
  redis.call('HINCRBY', runKey, 'queued', queued)
  -- A cancelled run stays cancelled: a retry reopens it first (begin-producing), so rows a
  -- retry still takes after a cancel are recorded cancelled by its producer.
  if redis.call('HGET', runKey, 'status') ~= 'cancelled' then set_status('running', now, nil) end
end
return moved
