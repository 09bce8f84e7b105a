import { LuaScript } from '../runs/index.js';

/*
 * The shared request budget's scripts (token-bucket.ts). Times are Redis's clock (TIME), the
 * one clock every worker process shares; replies give send times as ms from that now.
 */

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
`;

/**
 * Claims send times for up to N requests in one step: GCRA, the token bucket kept as one
 * number, the theoretical arrival time (TAT) of the next request. Request i may go at
 * max(now, TAT - tolerance); each one moves TAT on by `interval`. Only times within `horizon`
 * of now are granted, so a process never holds slots far ahead.
 *
 * With a known limit (ARGV[6] > 0) the bucket is only the pacing: the limit itself is a log of
 * the last `max` send times granted (KEYS[3], oldest first), and a request goes no sooner than
 * `window` after the one `max` grants before it. So no window of the CRM's `durationMs` ever
 * holds more than `max` grants, whatever bursts the bucket allows (one after an idle spell, a
 * first window). `window` is `durationMs` plus a margin for sends that leave late. A bucket
 * with no TAT yet starts empty: its first window is paced, not a burst.
 *
 * KEYS[1] the TAT, KEYS[2] the learned rate (a hash, below), KEYS[3] the send log. ARGV[1]
 * interval ms, or 0 to use the learned rate; ARGV[2] tolerance ms; ARGV[3] N; ARGV[4] horizon
 * ms; ARGV[5] the rate to start from when none was learned yet (requests/s); ARGV[6] window ms
 * (0: no log); ARGV[7] max.
 *
 * Learning (ARGV[1] = 0): while requests wait on the budget (TAT ahead of now, and not because
 * of a 429's pause: `hold`), the rate grows with the time that passes: about doubling a second
 * until a ceiling is known, or while far below it; near it by 0.5 % of the ceiling a second
 * (0.1 % once the ceiling was measured, PAUSE), faster the longer it holds above it (the limit
 * was raised). Grants are counted (`g`) for PAUSE's measure.
 *
 * Returns {wait, now, offset...}: Redis's now (ms) and the granted requests' send times as ms
 * from it; with none granted, `wait` is the ms until the first would fall within the horizon.
 */
export const CLAIM = new LuaScript(`${NOW}
local interval, tolerance, n, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local win, cap = tonumber(ARGV[6]), tonumber(ARGV[7])
local raw = redis.call('GET', KEYS[1])
local tat = tonumber(raw or '0')
local learning = interval == 0
if learning then
  local st = redis.call('HMGET', KEYS[2], 'rate', 'ceiling', 'at', 'hold', 'measured')
  local rate, ceiling, at = tonumber(st[1]) or tonumber(ARGV[5]), tonumber(st[2]) or 0, tonumber(st[3]) or now
  -- A 429's pause also puts TAT ahead of now: that is no sign of demand above the rate.
  if tat > now and now >= (tonumber(st[4]) or 0) then
    local dt = math.min(math.max(now - at, 0), 1000) / 1000
    if ceiling == 0 or rate < ceiling * 0.9 then
      rate = rate * (1 + dt)
    else
      local base = 0.005
      if st[5] == '1' then base = 0.001 end
      rate = rate + ceiling * (base + 0.2 * math.max(0, rate / ceiling - 1)) * dt
    end
  end
  redis.call('HSET', KEYS[2], 'rate', string.format('%.4f', rate), 'at', string.format('%.3f', now))
  interval = 1000 / rate
elseif not raw then
  tat = now + tolerance
end
if tat < now then tat = now end
local head, len, fresh = {}, 0, {}
if win > 0 then
  len = redis.call('LLEN', KEYS[3])
  if len > cap then
    redis.call('LTRIM', KEYS[3], len - cap, -1)
    len = cap
  end
  if len + n > cap then head = redis.call('LRANGE', KEYS[3], 0, n - 1) end
end
local out, next_at = {'0', string.format('%.3f', now)}, now
for i = 1, n do
  local at = tat - tolerance
  if at < now then at = now end
  if win > 0 then
    -- The grant \`cap\` before this one, in the stored log or among this call's own.
    local p = len + i - cap
    if p >= 1 then
      local prev
      if p <= len then prev = tonumber(head[p]) else prev = fresh[p - len] end
      if prev + win > at then at = prev + win end
    end
  end
  next_at = at
  if at > now + horizon then break end
  out[#out + 1] = string.format('%.3f', at - now)
  fresh[#fresh + 1] = at
  if at > tat then tat = at end
  tat = tat + interval
end
if #fresh == 0 then
  out[1] = string.format('%.3f', next_at - horizon - now)
  return out
end
redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 60000)
if win > 0 then
  local vals = {}
  for i = 1, #fresh do vals[i] = string.format('%.3f', fresh[i]) end
  redis.call('RPUSH', KEYS[3], unpack(vals))
  redis.call('LTRIM', KEYS[3], -cap, -1)
  redis.call('PEXPIRE', KEYS[3], math.ceil(fresh[#fresh] - now + win) + 1000)
end
if learning then
  redis.call('HINCRBY', KEYS[2], 'g', #fresh)
  redis.call('HSETNX', KEYS[2], 'since', string.format('%.3f', now))
end
return out
`);

/**
 * A 429's pause: no request of any process is granted a send time before now + ARGV[1] ms.
 * With ARGV[3] = '1' (a learned rate, KEYS[2]) the rate is also cut, once per ARGV[4] ms (the
 * 429s of requests sent before the cut say nothing new).
 *
 * Every 429 marks a moment the CRM had nothing to spare (`t429`, with the requests sent `s429`
 * and the 429s `r429` so far). A cut whose previous 429 was between 0.8 s and ARGV[6] ms ago
 * measures: the CRM was saturated from then to now, so what it accepted meanwhile, per second,
 * is its rate (exact for a token bucket, low for a sliding window that a pause left idle). The
 * ceiling becomes that measure and the rate 97 % of it (`measured`). Otherwise the first cut
 * halves the rate (growth from the start overshoots up to about twice), or takes it to 97 % of
 * what was accepted since the first request (`since`) if that is less; the ceiling stays
 * unknown, so growth goes on until a measure. Later ones take 10 % off (3 % once measured:
 * the rate crept up to the limit again), the rate at the cut becoming the ceiling. Returns the rate (0 with a known limit).
 *
 * `g` counts grants, some of them for times still ahead: those (TAT ahead of now, at the rate)
 * are not counted as sent.
 */
export const PAUSE = new LuaScript(`${NOW}
local resume = now + tonumber(ARGV[1]) + tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if resume > tat then redis.call('SET', KEYS[1], string.format('%.3f', resume), 'PX', math.ceil(resume - now) + 60000) end
if ARGV[3] ~= '1' then return '0' end
redis.call('HSET', KEYS[2], 'hold', string.format('%.3f', resume))
local r = redis.call('HINCRBY', KEYS[2], 'r', 1)
local st = redis.call('HMGET', KEYS[2], 'rate', 'ceiling', 'cut', 'g', 't429', 's429', 'r429', 'measured', 'since')
local rate, ceiling, cut = tonumber(st[1]), tonumber(st[2]) or 0, tonumber(st[3]) or 0
if not rate then return '0' end
local pending = 0
if tat > now then pending = (tat - now) * rate / 1000 end
local sent = (tonumber(st[4]) or 0) - pending
local t_last, s_last, r_last = tonumber(st[5]), tonumber(st[6]) or 0, tonumber(st[7]) or 0
redis.call('HSET', KEYS[2], 't429', string.format('%.3f', now), 's429', string.format('%.3f', sent), 'r429', r)
if now - cut < tonumber(ARGV[4]) then return string.format('%.4f', rate) end
local measured = st[8] or '0'
local span = 0
if t_last then span = now - t_last end
if span >= 800 and span <= tonumber(ARGV[6]) then
  local est = (sent - s_last - (r - r_last)) * 1000 / span
  if est > rate then est = rate end
  ceiling = math.max(tonumber(ARGV[5]), est)
  rate = math.max(tonumber(ARGV[5]), est * 0.97)
  measured = '1'
elseif cut == 0 and ceiling == 0 then
  -- What the CRM accepted since the first request is an upper bound of its rate (a bucket that
  -- started full gave its credit on top), often a closer one than half the rate at the 429.
  local since = tonumber(st[9]) or now
  local est = rate / 2
  if now - since >= 1000 then est = math.min(est, (sent - r) * 1000 / (now - since) * 0.97) end
  rate = math.max(tonumber(ARGV[5]), est)
elseif measured == '1' then
  -- Crept up to the limit again: it is about the rate now; a little below it holds.
  ceiling = rate
  rate = math.max(tonumber(ARGV[5]), rate * 0.97)
else
  ceiling = rate
  rate = math.max(tonumber(ARGV[5]), rate * 0.9)
end
redis.call('HSET', KEYS[2], 'rate', string.format('%.4f', rate), 'ceiling', string.format('%.4f', ceiling), 'cut', string.format('%.3f', now), 'at', string.format('%.3f', now), 'measured', measured)
return string.format('%.4f', rate)
`);
