-- decide.lua: record a reviewer decision, pending -> submitted | declined.
-- KEYS[1] record hash (also the shard channel)   KEYS[2] audit list
-- ARGV[1] review token hash  ARGV[2] decision ("submitted"|"declined")  ARGV[3] outcome JSON
-- ARGV[4] actor
-- Returns {"ok", status, decided_ms} or {"err", code} with code one of
-- not_found (no record or wrong token), expired, canceled, already_decided.
-- Clock: Redis TIME. Publishes the new status on KEYS[1] (SPUBLISH) when it changes.
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'token_hash')
if not f[1] or f[3] ~= ARGV[1] then
  return {'err', 'not_found'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = f[1]
if st == 'pending' then
  if now >= tonumber(f[2]) then
    return {'err', 'expired'}
  end
  local nows = string.format('%.0f', now)
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'decision', ARGV[2],
    'outcome', ARGV[3], 'decided_ms', nows)
  redis.call('RPUSH', KEYS[2], '{"type":"decided","at":' .. nows .. ',"actor":' ..
    cjson.encode(ARGV[4]) .. ',"decision":' .. cjson.encode(ARGV[2]) .. '}')
  redis.call('SPUBLISH', KEYS[1], ARGV[2])
  return {'ok', ARGV[2], nows}
elseif st == 'canceled' then
  return {'err', 'canceled'}
end
return {'err', 'already_decided'}
