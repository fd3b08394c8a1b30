-- claim.lua: take due webhook deliveries for a while (a lease). A worker that dies keeps its
-- lease until it runs out; then the delivery is due again and any replica takes it over.
-- KEYS[1] the shard's delivery queue   KEYS[2..] the deliveries
-- ARGV[1] lease in ms   ARGV[2] lease token   ARGV[3..] the delivery ids (in KEYS order)
-- Returns the claimed deliveries as JSON (each with "lease" = the token); deliveries no
-- longer due (another worker claimed them first) or gone are skipped.
-- Clock: Redis TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 2, #KEYS do
  local did = ARGV[i + 1]
  local score = redis.call('ZSCORE', KEYS[1], did)
  local json = redis.call('GET', KEYS[i])
  if not json then
    redis.call('ZREM', KEYS[1], did)
  elseif score and tonumber(score) <= now then
    local d = cjson.decode(json)
    d.lease = ARGV[2]
    json = cjson.encode(d)
    redis.call('SET', KEYS[i], json, 'KEEPTTL')
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), did)
    out[#out + 1] = json
  end
end
return out
