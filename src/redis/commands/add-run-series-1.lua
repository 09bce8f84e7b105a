--[[
  Adds one flush's increments into a run's activity series (metrics/run-series.ts): one hash a
  run, `<bucket>` -> "requests,rateLimited,failed,succeeded", `last` -> the newest bucket. A
  write that moves `last` on removes the buckets that fell out of the window, so the hash never
  holds more than `keep` buckets. Called with one key (runs' series keys have no common hash
  tag), but written for each key given.
  KEYS[1] seriesKey  the run's series hash
  ARGV[1] bucket
  ARGV[2] keep       most buckets kept
  ARGV[3] ttlSeconds
  ARGV[4] requests     the increments, in SERIES_FIELDS order (a second key would take four more)
  ARGV[5] rateLimited
  ARGV[6] failed
  ARGV[7] succeeded
  Returns the number of keys written.
]]
local bucketField, keep, ttlSeconds = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local FIRST_INCREMENT = 4

local b = tonumber(bucketField)
for i, key in ipairs(KEYS) do
  local last = tonumber(redis.call('HGET', key, 'last'))
  if last == nil or b > last then
    if last ~= nil then
      -- The window moves on: remove the buckets that fell out of it (by the bound, only these can exist).
      for old = last - keep + 1, math.min(last, b - keep) do redis.call('HDEL', key, string.format('%d', old)) end
    end
    redis.call('HSET', key, 'last', bucketField)
    last = b
  end
  -- A bucket already out of the window (a clock far behind) is dropped, never stored.
  if b > last - keep then
    local o = FIRST_INCREMENT - 1 + (i - 1) * 4
    local v = redis.call('HGET', key, bucketField)
    local n = { 0, 0, 0, 0 }
    if v then
      local k = 1
      for part in string.gmatch(v, '%d+') do n[k] = tonumber(part); k = k + 1 end
    end
    for k = 1, 4 do n[k] = n[k] + tonumber(ARGV[o + k]) end
    redis.call('HSET', key, bucketField, string.format('%d,%d,%d,%d', n[1], n[2], n[3], n[4]))
  end
  redis.call('EXPIRE', key, ttlSeconds)
end
return #KEYS
