-- create.lua: create a pending elicitation.
-- KEYS[1] record hash   KEYS[2] audit list            (same hash tag {<id>})
-- ARGV[1] expires_in_ms  ARGV[2] retention_ms  ARGV[3] kind  ARGV[4] tenant
-- ARGV[5] spec JSON      ARGV[6] review token hash  ARGV[7] token salt  ARGV[8] actor
-- Returns {"ok", created_ms, expires_ms} or {"err", "conflict"} if the id exists.
-- Clock: Redis TIME. Keys expire at expires_ms + retention_ms. Publishes nothing.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'err', 'conflict'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[1])
local nows = string.format('%.0f', now)
local exps = string.format('%.0f', exp)
redis.call('HSET', KEYS[1],
  'kind', ARGV[3], 'tenant', ARGV[4], 'status', 'pending',
  'created_ms', nows, 'expires_ms', exps, 'spec', ARGV[5],
  'token_hash', ARGV[6], 'token_salt', ARGV[7], 'fetches', '0')
redis.call('RPUSH', KEYS[2],
  '{"type":"created","at":' .. nows .. ',"actor":' .. cjson.encode(ARGV[8]) .. '}')
local gone = string.format('%.0f', exp + tonumber(ARGV[2]))
redis.call('PEXPIREAT', KEYS[1], gone)
redis.call('PEXPIREAT', KEYS[2], gone)
return {'ok', nows, exps}
