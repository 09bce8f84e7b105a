--[[
  A row's result bucket, derived from the row inside the script: one key per RESULT_BUCKET_ROWS
  rows cannot be listed in KEYS up front. On a Cluster this is safe because the bucket keys
  carry the run's workspace hash tag, as resultsBase does (keys/key-layout.ts): same slot.
  Expects the locals resultsBase (the bucket keys' common start) and RESULT_BUCKET_ROWS (set by
  the loader from keys/run-keys.ts).
]]
local function bucket(row)
  return resultsBase .. ':' .. math.floor(tonumber(row) / RESULT_BUCKET_ROWS)
end
