-- create.lua: create a pending elicitation.
-- KEYS[1] record hash   KEYS[2] audit list   KEYS[3] the shard's deadline index
-- KEYS[4] the shard's delivery queue   KEYS[5] the record's delivery list
-- KEYS[6..8] the `created` event's deliveries (webhook: unused, email, slack; see outbox.lua)
-- ARGV[1] expires_in_ms  ARGV[2] retention_ms  ARGV[3] kind  ARGV[4] tenant
-- ARGV[5] spec JSON      ARGV[6] review token hash  ARGV[7] token salt  ARGV[8] actor
-- ARGV[9] webhook URL ("" for none)  ARGV[10] "1" to include the result in webhook events
-- ARGV[11] the elicitation id   ARGV[12] email recipients (JSON array, "" for none)
-- ARGV[13] Slack incoming-webhook URL ("" for none)   ARGV[14..16] the `created` delivery ids
-- ARGV[17] named reviewers and quorum (panel JSON, "" for none)   ARGV[18] its tally "0/M"
-- KEYS[9..] review-index keys to point at the id (single Redis only: on a Cluster they are in
--   other slots and the caller writes them itself, before this call)   ARGV[19] their TTL in ms
-- Returns {"ok", created_ms, expires_ms}. If the record exists with the same token hash, this is
-- a client retry of a create that already ran: the same answer, nothing written. Another record
-- under the id is {"err", "conflict"} (an id collision).
-- A record with a webhook or a notification target joins the deadline index, so its "expired"
-- event can be emitted; one with notification targets gets its `created` deliveries (the
-- notifications that carry the review link) in this same step.
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
if ARGV[9] ~= '' then
  redis.call('HSET', KEYS[1], 'webhook_url', ARGV[9], 'webhook_result', ARGV[10])
end
if ARGV[12] ~= '' then
  redis.call('HSET', KEYS[1], 'notify_email', ARGV[12])
end
if ARGV[13] ~= '' then
  redis.call('HSET', KEYS[1], 'notify_slack', ARGV[13])
end
if ARGV[17] ~= '' then
  redis.call('HSET', KEYS[1], 'panel', ARGV[17], 'tally', ARGV[18])
end
redis.call('RPUSH', KEYS[2],
  '{"type":"created","at":' .. nows .. ',"actor":' .. cjson.encode(ARGV[8]) .. '}')
for i = 9, #KEYS do
  redis.call('SET', KEYS[i], ARGV[11], 'PX', ARGV[19])
end
local gone = string.format('%.0f', exp + tonumber(ARGV[2]))
redis.call('PEXPIREAT', KEYS[1], gone)
redis.call('PEXPIREAT', KEYS[2], gone)
if ARGV[9] ~= '' or ARGV[12] ~= '' or ARGV[13] ~= '' then
  event(KEYS[1], ARGV[11], KEYS[4], KEYS[3], KEYS[5], { KEYS[6], KEYS[7], KEYS[8] },
    { ARGV[14], ARGV[15], ARGV[16] }, 'created', now)
  redis.call('ZADD', KEYS[3], exps, ARGV[11])
end
return {'ok', nows, exps}
