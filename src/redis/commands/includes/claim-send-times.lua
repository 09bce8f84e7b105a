--[[
  Claims send times for up to N requests (rate/token-bucket.ts): claim_send_times, called by
  claim-tokens (the budget's own call) and begin-update (a row's send time claimed in the write
  fence's call, once the fence lets it go). The budget: GCRA, the token
  bucket kept as one number, the theoretical arrival time (TAT) of the next request. Request i
  may go at max(now, TAT - tolerance); each one moves TAT on by `interval`. Only times within
  `horizon` of now are granted, so a process never holds slots far ahead.

  With a known limit (window > 0) the bucket is only the pacing: the limit itself is a log of
  the last `max` send times granted (logKey, oldest first), and a request goes no sooner than
  `window` after the one `max` grants before it. So no window of the CRM's `durationMs` ever
  holds more than `max` grants, whatever bursts the bucket allows (one after an idle spell, a
  first window). `window` is `durationMs` plus a margin for sends that leave late. A bucket
  with no TAT yet starts empty: its first window is paced, not a burst.

  Learning (interval = 0): while requests wait on the budget (TAT ahead of now, and not because
  of a 429's pause: `hold`), the rate grows with the time that passes: doubling every `climbMs`
  while the workspace never met a 429 (no `cut` yet: a cold start, where every request short of
  the CRM's rate is lost and an overshoot costs one 429 episode however far it goes), at most
  doubling in one claim; after a 429 about doubling a second until a ceiling is known, or while
  far below it; near it by 0.5 % of the ceiling a second
  (0.1 % once the ceiling was measured, pause-tokens), faster the longer it holds above it (the
  limit was raised). Grants are counted (`g`) for pause-tokens' measure, less those a process
  reports it never sent (`unused`: it got them too late to use, or its request was called off).
  The first send time granted after a 429's pause ended is noted (`resumed`) for that measure.

  No send time is granted sooner than `lead` after now: the reply takes that long to reach the
  process (half a round trip and more, for a Redis a network hop away), and a time that has gone
  by when it arrives is no use to it. The horizon counts from there.

  Times are Redis's clock; replies give send times as ms from that now.
  claim_send_times(tatKey, rateKey, logKey, c), c = {interval, tolerance, n, horizon, startRate,
  window, max, unused, lead, climbMs} as claim-tokens' ARGV names them (strings as passed).
  Returns {wait, now, offset...}: Redis's now (ms) and the granted requests' send times as ms
  from it; with none granted, `wait` is the ms until the first would fall within the horizon.
]]

--- @include "includes/redis-clock"

local function claim_send_times(tatKey, rateKey, logKey, c)
  local interval, tolerance, n = tonumber(c.interval), tonumber(c.tolerance), tonumber(c.n)
  local horizon, startRate = tonumber(c.horizon), c.startRate
  local win, cap = tonumber(c.window), tonumber(c.max)
  local lead = math.max(0, tonumber(c.lead) or 0)

  local now = now_ms_exact()
  -- The soonest send time this reply can still carry in time.
  local soonest = now + lead
  local raw = redis.call('GET', tatKey)
  local tat = tonumber(raw or '0')
  local learning = interval == 0
  -- The first send time granted after a 429's pause ended (`ready`) is noted: until then the
  -- CRM's capacity went unused, which pause-tokens' measure leaves out.
  local note_resumed = false
  if learning then
    local st = redis.call('HMGET', rateKey, 'rate', 'ceiling', 'at', 'hold', 'measured', 'cut', 'ready', 'resumed')
    note_resumed = st[7] ~= false and st[8] == false
    local rate, ceiling, at = tonumber(st[1]) or tonumber(startRate), tonumber(st[2]) or 0, tonumber(st[3]) or now
    -- A 429's pause also puts TAT ahead of now: that is no sign of demand above the rate; nor is
    -- the lead of a grant (a TAT ahead by no more than this reply's own).
    if tat > soonest and now >= (tonumber(st[4]) or 0) then
      local dt = math.min(math.max(now - at, 0), 1000) / 1000
      if not st[6] and ceiling == 0 then
        rate = rate * math.min(2, 2 ^ (dt * 1000 / tonumber(c.climbMs)))
      elseif ceiling == 0 or rate < ceiling * 0.9 then
        rate = rate * (1 + dt)
      else
        local base = 0.005
        if st[5] == '1' then base = 0.001 end
        rate = rate + ceiling * (base + 0.2 * math.max(0, rate / ceiling - 1)) * dt
      end
    end
    redis.call('HSET', rateKey, 'rate', string.format('%.4f', rate), 'at', string.format('%.3f', now))
    interval = 1000 / rate
    local unused = tonumber(c.unused) or 0
    if unused > 0 then redis.call('HINCRBY', rateKey, 'g', -unused) end
  elseif not raw then
    tat = now + tolerance
  end
  if tat < soonest then tat = soonest end
  local head, len, fresh = {}, 0, {}
  if win > 0 then
    len = redis.call('LLEN', logKey)
    if len > cap then
      redis.call('LTRIM', logKey, len - cap, -1)
      len = cap
    end
    if len + n > cap then head = redis.call('LRANGE', logKey, 0, n - 1) end
  end
  local out, next_at = {'0', string.format('%.3f', now)}, now
  for i = 1, n do
    local at = tat - tolerance
    if at < soonest then at = soonest end
    if win > 0 then
      -- The grant `cap` before this one, in the stored log or among this call's own.
      local p = len + i - cap
      if p >= 1 then
        local prev
        if p <= len then prev = tonumber(head[p]) else prev = fresh[p - len] end
        if prev + win > at then at = prev + win end
      end
    end
    next_at = at
    if at > soonest + horizon then break end
    out[#out + 1] = string.format('%.3f', at - now)
    fresh[#fresh + 1] = at
    if at > tat then tat = at end
    tat = tat + interval
  end
  if #fresh == 0 then
    out[1] = string.format('%.3f', next_at - horizon - soonest)
    return out
  end
  redis.call('SET', tatKey, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 60000)
  if win > 0 then
    local vals = {}
    for i = 1, #fresh do vals[i] = string.format('%.3f', fresh[i]) end
    redis.call('RPUSH', logKey, unpack(vals))
    redis.call('LTRIM', logKey, -cap, -1)
    redis.call('PEXPIRE', logKey, math.ceil(fresh[#fresh] - now + win) + 1000)
  end
  if learning then
    redis.call('HINCRBY', rateKey, 'g', #fresh)
    redis.call('HSETNX', rateKey, 'since', string.format('%.3f', now))
    if note_resumed then redis.call('HSET', rateKey, 'resumed', string.format('%.3f', fresh[1])) end
  end
  return out
end
