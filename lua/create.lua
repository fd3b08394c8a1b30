-- create.lua: create a pending elicitation.
-- KEYS[1] record hash   KEYS[2] audit list            (same hash tag {<id>})
-- ARGV[1] expires_in_ms  ARGV[2] retention_ms  ARGV[3] kind  ARGV[4] tenant
-- ARGV[5] spec JSON      ARGV[6] review token hash  ARGV[7] token salt  ARGV[8] actor
-- Returns {"ok", created_ms, expires_ms}. If the record exists with the same token hash, this is
-- a client retry of a create that already ran: the same answer, nothing written. Another record
-- under the id is {"err", "conflict"} (an id collision).
-- Clock: Redis TIME. Keys expire at expires_ms + retention_ms. Publishes nothing.
local have = redis.call('HMGET', KEYS[1], 'token_hash', 'created_ms', 'expires_ms')
if have[1] then
  if have[1] == ARGV[6] then
    return {'ok', have[2], have[3]}
  end
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
  'token_hash', ARGV[6], 'token_salt', ARGV[7])
redis.call('RPUSH', KEYS[2],
  '{"type":"created","at":' .. nows .. ',"actor":' .. cjson.encode(ARGV[8]) .. '}')
local gone = string.format('%.0f', exp + tonumber(ARGV[2]))
redis.call('PEXPIREAT', KEYS[1], gone)
redis.call('PEXPIREAT', KEYS[2], gone)
return {'ok', nows, exps}
