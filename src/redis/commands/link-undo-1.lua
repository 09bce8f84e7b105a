--[[
  Names an undo run on the run it undoes (runs/undo: linked both ways). The run hash keeps its
  undo runs space-separated in `undoneBy`, oldest first; naming one twice changes nothing.
  KEYS[1] runKey   the undone run's hash
  ARGV[1] undoId   the undo run's id
  Returns 1 when linked, 0 when the run hash is gone (an archived run: the undo names it all the same).
]]
local runKey, undoId = KEYS[1], ARGV[1]
if redis.call('EXISTS', runKey) == 0 then return 0 end
local held = redis.call('HGET', runKey, 'undoneBy') or ''
for id in string.gmatch(held, '%S+') do
  if id == undoId then return 1 end
end
redis.call('HSET', runKey, 'undoneBy', (held == '' and undoId) or (held .. ' ' .. undoId))
return 1
