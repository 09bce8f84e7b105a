--[[
  A row's update is over: ends the row's in-flight lease on the record (write-order).
  KEYS[1] orderKey  the record's write order
  ARGV[1] seq       the row's place in write order
  ARGV[2] applied   '1' when the write was applied (or may have been), '0' when the answer
                    proved it was not
  ARGV[3] windowMs  the ordering window
]]
local orderKey = KEYS[1]
local seq, applied, windowMs = ARGV[1], ARGV[2] == '1', ARGV[3]
--- @include "includes/write-order"

settle_order(orderKey, seq, applied, windowMs)
return 1
