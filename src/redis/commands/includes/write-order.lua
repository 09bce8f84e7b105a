--[[
  A record's write order, per field (docs/architecture.md, "Write order of a record"). The
  record's order key is a hash:
    `f:<field>` = `<seq>|<value as JSON>`: the last row applied to the record that wrote this
                  field, and the value it wrote (a required field a row may not leave out is
                  sent with it when an older row goes later);
    `~`         = cjson `{s = seq, u = until ms, f = {field = value JSON}}`: the write on the
                  wire, whose lease ends at `u`;
    `*`         = a seq that wrote every field: what a record's order of an earlier version
                  (one string, `applied[|inflight|untilMs]`, ordered per record) is read as.
  Sequences are fixed-width strings that sort in row order (runs/row-fence.ts: seqOf). The
  functions take the order key as an argument: no KEYS are assumed.
]]

-- What a script changes is written back alone (write_order): `dirty` names the fields, `read`
-- is the in-flight entry as read (a different table, or nil, means it changed).
local function read_order(key)
  local st = { fields = {}, star = '', inflight = nil, dirty = {}, kind = 'none' }
  -- Read as the hash it almost always is (or no key: an empty reply), one call a row's send and
  -- settle; only a key of another type, an earlier version's string, is asked its TYPE.
  local all = redis.pcall('HGETALL', key)
  if all.err then
    local kind = redis.call('TYPE', key).ok
    st.kind = kind
    if kind ~= 'string' then return st end
    local v = redis.call('GET', key)
    local a, i, u = string.match(v, '^([^|]*)|([^|]*)|(%d+)$')
    if a then
      st.star = a
      st.inflight = { s = i, u = tonumber(u) }
    else
      st.star = v
    end
    return st
  end
  if #all == 0 then return st end
  st.kind = 'hash'
  for n = 1, #all, 2 do
    local name, v = all[n], all[n + 1]
    if name == '~' then
      st.inflight = cjson.decode(v)
    elseif name == '*' then
      st.star = v
    else
      local s, val = string.match(v, '^([^|]*)|(.*)$')
      st.fields[string.sub(name, 3)] = { s = s, v = val }
    end
  end
  st.read = st.inflight
  return st
end

-- The seq of the last applied row that wrote the field ('' = none in the window).
local function field_seq(st, name)
  local f = st.fields[name]
  if f and f.s > st.star then return f.s end
  return st.star
end

-- A write (seq, its fields) counts as applied: each field it wrote remembers it, unless a later
-- row's write of that field already counts. No fields: an earlier version's write of every field.
local function apply_write(st, seq, fields)
  if not fields then
    if seq > st.star then
      st.star = seq
      st.dirty['*'] = true
    end
    return
  end
  for name, val in pairs(fields) do
    if seq > field_seq(st, name) then
      st.fields[name] = { s = seq, v = val }
      st.dirty[name] = true
    end
  end
end

local function write_order(key, st, window_ms)
  -- An earlier version's string is rewritten whole as a hash; a hash gets only what changed.
  local whole = st.kind ~= 'hash'
  if st.kind == 'string' then redis.call('DEL', key) end
  local out = {}
  for name, f in pairs(st.fields) do
    if whole or st.dirty[name] then
      out[#out + 1] = 'f:' .. name
      out[#out + 1] = f.s .. '|' .. f.v
    end
  end
  if st.star ~= '' and (whole or st.dirty['*']) then
    out[#out + 1] = '*'
    out[#out + 1] = st.star
  end
  local moved = whole or st.inflight ~= st.read
  if st.inflight and moved then
    out[#out + 1] = '~'
    out[#out + 1] = cjson.encode(st.inflight)
  elseif moved and not whole then
    redis.call('HDEL', key, '~')
  end
  if #out > 0 then redis.call('HSET', key, unpack(out)) end
  if #out > 0 or moved then redis.call('PEXPIRE', key, window_ms) end
end

-- A write on the wire whose lease ran out counts as applied: its request may still land.
local function expire_inflight(st, now)
  if st.inflight and st.inflight.u <= now then
    apply_write(st, st.inflight.s, st.inflight.f)
    st.inflight = nil
  end
end

-- A row's write to the record is over: applied (or possibly), its fields remember it unless a
-- later row's write of the same field already counts; its in-flight lease, if still its own,
-- ends. A lease no longer its own ran out and was counted as applied when it did.
local function settle_order(key, seq, applied_now, window_ms)
  local st = read_order(key)
  if st.inflight and st.inflight.s == seq then
    if applied_now then apply_write(st, seq, st.inflight.f) end
    st.inflight = nil
    write_order(key, st, window_ms)
  end
end
