-- decide.lua: record a reviewer decision, pending -> submitted | declined.
-- KEYS[1] record hash (also the shard channel)   KEYS[2] audit list
-- KEYS[3] the shard's delivery queue  KEYS[4] the shard's deadline index
-- KEYS[5] the record's delivery list  KEYS[6..8] this event's deliveries (webhook, email, slack;
-- see outbox.lua)
-- ARGV[1] review token hash  ARGV[2] decision ("submitted"|"declined")  ARGV[3] outcome JSON
-- ARGV[4] actor  ARGV[5] a random nonce of this attempt  ARGV[6] elicitation id
-- ARGV[7..9] this event's delivery ids (webhook, email, slack)
-- Returns {"ok", status, decided_ms} when recorded — also when the record already carries this
--   attempt's nonce: a client that re-sends the command after a lost reply (reconnect,
--   failover) must not be told its own decision was someone else's;
--   {"no", status, outcome JSON, decided_ms} when the record is no longer pending (status is
--   the effective one: submitted, declined, consumed, canceled or expired; outcome and
--   decided_ms are nil unless decided), so the caller can show the state without reading again;
--   {"err", "not_found"} for no record or a wrong token.
-- Clock: Redis TIME. Publishes the new status on KEYS[1] (SPUBLISH) when it changes, and
-- writes the webhook event "elicitation.<decision>" in the same step (outbox.lua).
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'token_hash', 'outcome',
  'decided_ms', 'decide_nonce')
if not f[1] or f[3] ~= ARGV[1] then
  return {'err', 'not_found'}
end
local st = f[1]
if st ~= 'pending' then
  if f[6] == ARGV[5] then
    return {'ok', ARGV[2], f[5]}
  end
  return {'no', st, f[4] or false, f[5] or false}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(f[2]) then
  return {'no', 'expired', false, false}
end
local nows = string.format('%.0f', now)
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'outcome', ARGV[3], 'decided_ms', nows,
  'decide_nonce', ARGV[5])
redis.call('RPUSH', KEYS[2], '{"type":"decided","at":' .. nows .. ',"actor":' ..
  cjson.encode(ARGV[4]) .. ',"decision":' .. cjson.encode(ARGV[2]) .. '}')
redis.call('SPUBLISH', KEYS[1], ARGV[2])
event(KEYS[1], ARGV[6], KEYS[3], KEYS[4], KEYS[5], { KEYS[6], KEYS[7], KEYS[8] },
  { ARGV[7], ARGV[8], ARGV[9] }, ARGV[2], now)
return {'ok', ARGV[2], nows}
