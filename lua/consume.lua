-- consume.lua: read the outcome, submitted|declined -> consumed (repeat reads allowed).
-- KEYS[1] record hash (also the shard channel)   KEYS[2] audit list
-- KEYS[3..8] delivery queue, deadline index, delivery list, this event's deliveries (webhook,
-- email, slack; outbox.lua); ARGV[5..7] their ids
-- ARGV[1] tenant   ARGV[2] actor   ARGV[3] most audit entries to append a "fetched" event to
-- ARGV[4] elicitation id
-- Returns {"ok", outcome JSON, decided_ms, spec JSON, panel JSON or nil} or {"err", code}: not_found, not_decided,
-- canceled, expired. Every successful call counts in the record's `fetches` and appends a
-- "fetched" audit event while the audit trail has fewer than ARGV[3] entries (so an agent reading a
-- result in a loop cannot grow the record without bound).
-- Clock: Redis TIME. Publishes "consumed" on KEYS[1] (SPUBLISH) on the first read, and writes
-- the webhook event "elicitation.consumed" in the same step.
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'tenant', 'outcome',
  'decided_ms', 'spec', 'panel')
if not f[1] or f[3] ~= ARGV[1] then
  return {'err', 'not_found'}
end
local st = f[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if st == 'canceled' then
  return {'err', 'canceled'}
end
if st == 'pending' then
  if now >= tonumber(f[2]) then
    return {'err', 'expired'}
  end
  return {'err', 'not_decided'}
end
local nows = string.format('%.0f', now)
if st ~= 'consumed' then
  redis.call('HSET', KEYS[1], 'status', 'consumed')
  redis.call('SPUBLISH', KEYS[1], 'consumed')
  event(KEYS[1], ARGV[4], KEYS[3], KEYS[4], KEYS[5], { KEYS[6], KEYS[7], KEYS[8] },
    { ARGV[5], ARGV[6], ARGV[7] }, 'consumed', now)
end
redis.call('HINCRBY', KEYS[1], 'fetches', 1)
if audit_count(KEYS[2]) < tonumber(ARGV[3]) then
  audit_append(KEYS[1], KEYS[2], '{"type":"fetched","at":' .. nows .. ',"actor":' ..
    cjson.encode(ARGV[2]) .. '}')
end
return {'ok', f[4], f[5], f[6], f[7] or false}
