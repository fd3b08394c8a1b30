-- finish.lua: record a delivery attempt's outcome, if this worker still holds the lease.
-- KEYS[1] the shard's delivery queue   KEYS[2] the delivery   KEYS[3] the record's audit list
-- KEYS[4] the record
-- ARGV[1] lease token   ARGV[2] the delivery's new JSON   ARGV[3] when to try again (ms), or
-- "" when done (delivered or failed)   ARGV[4] an audit entry JSON, or ""   ARGV[5] delivery id
-- Returns "ok", or "lost" when another worker took the delivery over (its lease ran out):
-- nothing is written then.
local json = redis.call('GET', KEYS[2])
if not json or cjson.decode(json).lease ~= ARGV[1] then
  return 'lost'
end
redis.call('SET', KEYS[2], ARGV[2], 'KEEPTTL')
if ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[5])
else
  redis.call('ZREM', KEYS[1], ARGV[5])
end
-- Not onto the trail of a record that is gone (expired, or withdrawn by an idempotency race):
-- that would make a list without an expiry.
if ARGV[4] ~= '' and redis.call('EXISTS', KEYS[4]) == 1 then
  audit_append(KEYS[4], KEYS[3], ARGV[4])
end
return 'ok'
