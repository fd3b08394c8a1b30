-- read.lua: read fields of one or more records, with the Redis clock read first. Serves the
-- status, review and replay reads; the read batcher (src/store/redis/batch.rs) sends the reads
-- that arrive together as one call.
-- KEYS   record keys (all in one hash slot under Redis Cluster)
-- ARGV   for each key in order: the number of fields n, then the n field names
-- Returns {seconds, microseconds, {values of KEYS[1]}, {values of KEYS[2]}, ...}; a missing
--   field (or record) is nil. Writes nothing, publishes nothing.
-- Exactness (docs/architecture.md): TIME runs before every HMGET in this atomic call, so a record read as
-- pending at or past its deadline can no longer be decided (decide.lua refuses after it).
local t = redis.call('TIME')
local out = { t[1], t[2] }
local a = 1
for i, key in ipairs(KEYS) do
  local n = tonumber(ARGV[a])
  out[i + 2] = redis.call('HMGET', key, unpack(ARGV, a + 1, a + n))
  a = a + n + 1
end
return out
