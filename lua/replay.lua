-- replay.lua: deliver a failed webhook delivery again, now and then on the whole retry schedule
-- (the schedule counts from here; earlier attempts stay in the history). An email delivery
-- tries the recipients refused before again (those already accepted are not sent to twice).
-- KEYS[1] the shard's delivery queue   KEYS[2] the delivery   KEYS[3] its record
-- ARGV[1] tenant   ARGV[2] delivery id   ARGV[3] the record's id
-- Returns {"ok", JSON} or {"err", code}: not_found (no such delivery for this tenant),
-- not_decided (the delivery has not failed: it is pending, in flight or delivered).
-- Clock: Redis TIME.
local json = redis.call('GET', KEYS[2])
if not json or redis.call('HGET', KEYS[3], 'tenant') ~= ARGV[1] then
  return {'err', 'not_found'}
end
local d = cjson.decode(json)
if d.elicitationId ~= ARGV[3] then
  return {'err', 'not_found'}
end
if d.state ~= 'failed' then
  return {'err', 'not_decided'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
d.state = 'pending'
d.nextAt = now
d.replays = (d.replays or 0) + 1
d.scheduleFrom = #(d.attempts or {})
d.lease = nil
d.refused = nil
json = cjson.encode(d)
redis.call('SET', KEYS[2], json, 'KEEPTTL')
redis.call('ZADD', KEYS[1], now, ARGV[2])
return {'ok', json}
