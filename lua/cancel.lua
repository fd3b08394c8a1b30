-- cancel.lua: the requester withdraws, pending -> canceled (repeat cancels answer canceled).
-- KEYS[1] record hash (also the shard channel)   KEYS[2] audit list
-- KEYS[3..8] delivery queue, deadline index, delivery list, this event's deliveries (webhook,
-- email, slack; outbox.lua); ARGV[4..6] their ids
-- ARGV[1] tenant   ARGV[2] actor   ARGV[3] elicitation id
-- Returns {"ok", "canceled", changed} (changed "1" the first time, "0" on repeats) or
-- {"err", code}: not_found (absent or other tenant), expired, already_decided.
-- Clock: Redis TIME. Publishes "canceled" on KEYS[1] (SPUBLISH) when it changes, and writes
-- the webhook event "elicitation.canceled" in the same step.
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'tenant')
if not f[1] or f[3] ~= ARGV[1] then
  return {'err', 'not_found'}
end
local st = f[1]
if st == 'canceled' then
  return {'ok', 'canceled', '0'}
end
if st ~= 'pending' then
  return {'err', 'already_decided'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(f[2]) then
  return {'err', 'expired'}
end
local nows = string.format('%.0f', now)
redis.call('HSET', KEYS[1], 'status', 'canceled')
audit_append(KEYS[1], KEYS[2], '{"type":"canceled","at":' .. nows .. ',"actor":' ..
  cjson.encode(ARGV[2]) .. '}')
redis.call('SPUBLISH', KEYS[1], 'canceled')
event(KEYS[1], ARGV[3], KEYS[3], KEYS[4], KEYS[5], { KEYS[6], KEYS[7], KEYS[8] },
  { ARGV[4], ARGV[5], ARGV[6] }, 'canceled', now)
return {'ok', 'canceled', '1'}
