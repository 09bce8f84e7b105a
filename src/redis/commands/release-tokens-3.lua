--[[
  Gives back send times a process was granted (claim-tokens) but will never use: it missed them
  by more than its margin allows (token-bucket.ts #missed), so it claims new ones instead. Known
  limit only. Each given-back time leaves the send log, and the TAT moves back one interval for
  each, so the bandwidth it held is granted again: without this, a loaded machine whose timers
  fire late lost every missed time from the limit (bench/RESULTS.md, "Change control").

  Safe by the log: a send time given back is never sent, so the log without it still holds every
  send that may happen, and every later grant is checked against that log (no window of `window`
  holds more than `max`). The TAT only paces: moved back, it allows at most the burst the
  tolerance allows after an idle spell, and never before a 429's pause ends (`hold`).

  KEYS[1] tatKey     the TAT
  KEYS[2] rateKey    its `hold` field: no send time before it (pause-tokens)
  KEYS[3] logKey     the send log (oldest first)
  ARGV[1] interval   ms
  ARGV[2..] times    the send times given back, on Redis's clock (ms), as granted
  Returns how many were found in the log and given back (one no longer there is left alone).
]]
local tatKey, rateKey, logKey = KEYS[1], KEYS[2], KEYS[3]
local interval = tonumber(ARGV[1])
local log = redis.call('LRANGE', logKey, 0, -1)
if #log == 0 then return 0 end
local gone, found = {}, 0
for i = 2, #ARGV do
  local t = tonumber(ARGV[i])
  for j = 1, #log do
    -- Grants are stored with 3 decimals; the process got them as offsets from Redis's now.
    if not gone[j] and math.abs(tonumber(log[j]) - t) < 0.01 then
      gone[j] = true
      found = found + 1
      break
    end
  end
end
if found == 0 then return 0 end
local keep = {}
for j = 1, #log do
  if not gone[j] then keep[#keep + 1] = log[j] end
end
local ttl = redis.call('PTTL', logKey)
redis.call('DEL', logKey)
if #keep > 0 then
  redis.call('RPUSH', logKey, unpack(keep))
  if ttl > 0 then redis.call('PEXPIRE', logKey, ttl) end
end
local raw = redis.call('GET', tatKey)
if raw then
  local hold = tonumber(redis.call('HGET', rateKey, 'hold') or '0') or 0
  local tat = math.max(tonumber(raw) - found * interval, hold)
  local ttlTat = redis.call('PTTL', tatKey)
  redis.call('SET', tatKey, string.format('%.3f', tat), 'PX', math.max(ttlTat, 1))
end
return found
