--[[
  The create marker's one codec in Lua (runs/row-fence.ts parseMarker reads the same text in
  TypeScript; keys/key-layout.ts lists the key): `sentAtMs|crmClockMs|kind|dealId|uncertainAtMs`.
    sentAtMs       Redis's clock when the attempt sent its POST (kind 2: a time before the send)
    crmClockMs     the CRM's clock then, as the worker estimated it (may be negative)
    kind           0/1: sentAtMs is this attempt's send (1: the CRM's Date header was known);
                   2: a marker `runs retry` put back for a row in doubt (restore-create)
    dealId         empty until known
    uncertainAtMs  set (with its `|`) when the attempt's answer was lost (hold-create) or a
                   lookup left the row uncertain: the next look needs a pass begun after it

  The markers' key has a TTL of its own, so the evidence that a row's POST was sent is kept
  beside the row's result too, in its result bucket as field `c<row>` (RunKeys.sentField): a
  copy of the marker, written by the same scripts in the same steps, with no TTL, gone only when
  the row recorded its deal, proved its POST not applied, or its run was deleted. A marker that
  is gone while its copy is there is put back from it (begin-create).
]]

-- The marker's fields as strings, or nil for a text that is no marker.
local function parse_marker(text)
  local sent, clock, kind, deal, uncertain = string.match(text, '^(%d+)|(%-?%d+)|(%d)|([^|]*)|?(%d*)$')
  if not sent then return nil end
  return { sent = sent, clock = clock, kind = kind, deal = deal, uncertain = uncertain }
end

-- A marker's text; uncertain may be nil (no stamp, and no trailing `|`).
local function format_marker(sent, clock, kind, deal, uncertain)
  local text = sent .. '|' .. clock .. '|' .. kind .. '|' .. deal
  if uncertain then text = text .. '|' .. uncertain end
  return text
end

-- The row's send evidence: its field in the row's result bucket (RunKeys.sentField).
local function sent_field(row)
  return 'c' .. row
end
