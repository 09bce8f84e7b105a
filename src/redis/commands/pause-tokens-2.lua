--[[
  A 429's pause (queue/token-bucket.ts): no request of any process is granted a send time
  before now + pauseMs. With a learned rate the rate is also cut, once per cooldownMs (the
  429s of requests sent before the cut say nothing new).

  Every 429 marks a moment the CRM had nothing to spare (`t429`, with the requests sent `s429`
  and the 429s `r429` so far). A cut whose previous 429 was between 0.8 s and measureSpanMs ago
  measures: the CRM was saturated from then to now, so what it accepted meanwhile, per second,
  is its rate (exact for a token bucket, low for a sliding window that a pause left idle). The
  stretch from the last pause's end (`ready`, when Retry-After said the CRM would take requests
  again) to the first send time granted after it (`resumed`, noted by claim-send-times) is left
  out of the span: the CRM's capacity went unused then (a bucket full, a window empty), and
  counted in, the jobs' way back to a worker far from its Redis made the measure 4-8 % low. The
  ceiling becomes that measure and the rate 99 % of it (`measured`): with the pause's own
  seconds and the pending grants kept out of it the measure is within ~1 % (49.7 against 50/s),
  and every % below it is a % of the run lost. Otherwise the first cut
  halves the rate (growth from the start overshoots up to about twice), or takes it to 97 % of
  what was accepted since the first request (`since`) if that is less; the ceiling stays
  unknown, so growth goes on until a measure. Later ones take 10 % off (3 % once measured: the
  rate crept up to the limit again), the rate at the cut becoming the ceiling.

  `g` counts grants, some of them for times still ahead: those (TAT ahead of now, at the rate)
  are not sent (the pause holds them back), so the episode's first 429 takes them off `g`. A TAT
  ahead only by an earlier 429's pause (up to `hold`) is no grant: the later 429s of an episode
  take nothing off (counted as sent, the pause's second made a measure ~60 % high at 50/s).
  KEYS[1] tatKey         the TAT (claim-tokens)
  KEYS[2] rateKey        the learned rate
  ARGV[1] pauseMs
  ARGV[2] tolerance      ms
  ARGV[3] learning       '1' when the rate is learned (rateKey)
  ARGV[4] cooldownMs     the least time between two cuts
  ARGV[5] minRate        requests/s the rate never falls below
  ARGV[6] measureSpanMs  two 429s at most this far apart measure the rate
  ARGV[7] unused         earlier grants of this process it did not send (taken off `g` first)
  ARGV[8..] caught       learning: this process's grants the 429 caught unsent (Redis clock, ms):
                         those at or before `judge` come off `g` here, before the measure reads it
  The episode's first 429 counts the grants ahead of its now as pending (`judge`, kept for the
  episode's later 429s): a grant at or before it that a process never sent (its timer not run
  yet) is counted as sent unless that process tells it: those it holds when it tells the 429
  (`caught`), here; those of a claim's reply that came after (`unused`), with its next call.
  Returns {rate, judge}: the rate (0 with a known limit) and that instant (Redis's clock, ms).
]]
local tatKey, rateKey = KEYS[1], KEYS[2]
local pauseMs, tolerance, learning = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local cooldownMs, minRate, measureSpanMs = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
--- @include "includes/redis-clock"

local now = now_ms_exact()
local resume = now + pauseMs + tolerance
local tat = tonumber(redis.call('GET', tatKey) or '0')
if resume > tat then redis.call('SET', tatKey, string.format('%.3f', resume), 'PX', math.ceil(resume - now) + 60000) end
if not learning then return {string.format('%.4f', 0), string.format('%.3f', now)} end
local held = tonumber(redis.call('HGET', rateKey, 'hold') or '0')
local judge = now
if now < held then judge = tonumber(redis.call('HGET', rateKey, 'judge')) or now end
local judgeText = string.format('%.3f', judge)
redis.call('HSET', rateKey, 'hold', string.format('%.3f', resume), 'judge', judgeText)
local r = redis.call('HINCRBY', rateKey, 'r', 1)
local unused = tonumber(ARGV[7]) or 0
for i = 8, #ARGV do
  if tonumber(ARGV[i]) <= judge then unused = unused + 1 end
end
if unused > 0 then redis.call('HINCRBY', rateKey, 'g', -unused) end
local st = redis.call('HMGET', rateKey, 'rate', 'ceiling', 'cut', 'g', 't429', 's429', 'r429', 'measured', 'since', 'ready', 'resumed')
-- When the CRM said it would take requests again; the next claim notes when the first went.
redis.call('HSET', rateKey, 'ready', string.format('%.3f', now + pauseMs))
redis.call('HDEL', rateKey, 'resumed')
local rate, ceiling, cut = tonumber(st[1]), tonumber(st[2]) or 0, tonumber(st[3]) or 0
if not rate then return {string.format('%.4f', 0), judgeText} end
local pending = 0
local from = math.max(now, held)
if tat > from then pending = math.floor((tat - from) * rate / 1000) end
if pending > 0 then redis.call('HINCRBY', rateKey, 'g', -pending) end
local sent = (tonumber(st[4]) or 0) - pending
local t_last, s_last, r_last = tonumber(st[5]), tonumber(st[6]) or 0, tonumber(st[7]) or 0
redis.call('HSET', rateKey, 't429', string.format('%.3f', now), 's429', string.format('%.3f', sent), 'r429', r)
if now - cut < cooldownMs then return {string.format('%.4f', rate), judgeText} end
local measured = st[8] or '0'
local span = 0
if t_last then span = now - t_last end
-- From the last pause's end to the first send after it the CRM's capacity went unused (a bucket
-- full, a window empty): not part of what it can take.
local idle = 0
if st[10] and st[11] then idle = math.max(0, tonumber(st[11]) - tonumber(st[10])) end
if span >= 800 and span <= measureSpanMs and span - idle >= 500 then
  local est = (sent - s_last - (r - r_last)) * 1000 / (span - idle)
  if est > rate then est = rate end
  ceiling = math.max(minRate, est)
  rate = math.max(minRate, est * 0.99)
  measured = '1'
elseif cut == 0 and ceiling == 0 then
  -- What the CRM accepted since the first request is an upper bound of its rate (a bucket that
  -- started full gave its credit on top), often a closer one than half the rate at the 429.
  local since = tonumber(st[9]) or now
  local est = rate / 2
  if now - since >= 1000 then est = math.min(est, (sent - r) * 1000 / (now - since) * 0.97) end
  rate = math.max(minRate, est)
elseif measured == '1' then
  -- Crept up to the limit again: it is about the rate now; a little below it holds.
  ceiling = rate
  rate = math.max(minRate, rate * 0.97)
else
  ceiling = rate
  rate = math.max(minRate, rate * 0.9)
end
redis.call('HSET', rateKey, 'rate', string.format('%.4f', rate), 'ceiling', string.format('%.4f', ceiling), 'cut', string.format('%.3f', now), 'at', string.format('%.3f', now), 'measured', measured)
return {string.format('%.4f', rate), judgeText}
