-- due.lua: which members of a sorted set are due, by the Redis clock. Read-only.
-- KEYS[1] a shard's delivery queue or deadline index   ARGV[1] most members to return
-- Returns {now_ms, member, ...}: members scored at or before now, earliest first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = { string.format('%.0f', now) }
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(due) do
  out[#out + 1] = m
end
return out
