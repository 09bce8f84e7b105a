--[[
  Every run script's start (runs/run-store.ts): the run hash and the workspace's status indexes
  are its KEYS[1..5], so a status change and its index move happen in the same atomic step as
  the counts that caused it. A run whose hash is gone answers the error RUN_NOT_FOUND, which
  the store turns into a CrmSyncError.
  Expects the locals runKey, runningKey, blockedKey, completedKey, failedKey (KEYS[1..5]).
]]
if redis.call('EXISTS', runKey) == 0 then return redis.error_reply('RUN_NOT_FOUND no such run') end
-- The cancelled index is <prefix>:ws:{<w>}:runs:status:cancelled, derived from the running one
-- (keys/run-keys.ts), so the KEYS every run script shares stay five.
local STATUS_INDEX = {
  running = runningKey,
  blocked = blockedKey,
  completed = completedKey,
  failed = failedKey,
  cancelled = string.sub(runningKey, 1, -8) .. 'cancelled',
}
local ENDED = { completed = true, failed = true, cancelled = true }

-- Moves the run to a status, keeping the status index, finishedAt and reason in step.
local function set_status(status, now, reason)
  local current = redis.call('HMGET', runKey, 'status', 'id', 'createdMs')
  if current[1] ~= status then
    if current[1] and STATUS_INDEX[current[1]] then redis.call('ZREM', STATUS_INDEX[current[1]], current[2]) end
    redis.call('ZADD', STATUS_INDEX[status], current[3], current[2])
    redis.call('HSET', runKey, 'status', status)
  end
  if ENDED[status] then
    redis.call('HSET', runKey, 'finishedAt', now)
    -- Kept once: retries move finishedAt, the first pass's end stays (the run's own duration).
    redis.call('HSETNX', runKey, 'firstFinishedAt', now)
  else
    redis.call('HDEL', runKey, 'finishedAt')
  end
  if reason and reason ~= '' then
    redis.call('HSET', runKey, 'reason', reason)
  else
    redis.call('HDEL', runKey, 'reason')
  end
end

-- A running run whose producer is done and whose queue share is empty is complete.
local function complete_if_done(now)
  local f = redis.call('HMGET', runKey, 'status', 'producerDone', 'queued')
  if f[1] == 'running' and f[2] == '1' and tonumber(f[3]) == 0 then
    set_status('completed', now, nil)
  end
end
