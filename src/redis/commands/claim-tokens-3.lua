--[[
  Claims send times for up to N requests in one step (rate/token-bucket.ts): the budget's own
  call, for requests whose send time no other call carries (list pages, rows that wait on a
  read). How the budget works: includes/claim-send-times.lua.
  KEYS[1] tatKey     the TAT
  KEYS[2] rateKey    the learned rate (a hash: rate, ceiling, at, hold, measured, g, since, ...)
  KEYS[3] logKey     the send log
  ARGV[1] interval   ms, or 0 to use the learned rate
  ARGV[2] tolerance  ms
  ARGV[3] n          requests to claim
  ARGV[4] horizon    ms
  ARGV[5] startRate  the rate to start from when none was learned yet (requests/s)
  ARGV[6] window     ms (0: no log)
  ARGV[7] max        grants per window
  ARGV[8] unused     learning: earlier grants of this process it did not send (taken off `g`)
  ARGV[9] lead       ms: the soonest a send time may be (the process's measured reply time)
  ARGV[10] climbMs   learning, before the first 429: the rate doubles every this many ms
  Returns {wait, now, offset...}: Redis's now (ms) and the granted requests' send times as ms
  from it; with none granted, `wait` is the ms until the first would fall within the horizon.
]]
--- @include "includes/claim-send-times"

return claim_send_times(KEYS[1], KEYS[2], KEYS[3], {
  interval = ARGV[1], tolerance = ARGV[2], n = ARGV[3], horizon = ARGV[4], startRate = ARGV[5],
  window = ARGV[6], max = ARGV[7], unused = ARGV[8], lead = ARGV[9], climbMs = ARGV[10],
})
