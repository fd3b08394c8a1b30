-- expire.lua: emit "elicitation.expired" for requests whose deadline passed undecided
-- (`expired` itself is never written: the status stays computed). Exactly once across the
-- fleet: an id leaves the deadline index in the same step as its event is written.
-- KEYS[1] the shard's deadline index   KEYS[2] the shard's delivery queue
-- then for each id i (0-based): KEYS[3+3i] record, KEYS[4+3i] its delivery list,
-- KEYS[5+3i] its expiry event's delivery
-- ARGV for each id i: ARGV[1+2i] the id, ARGV[2+2i] its expiry event's delivery id
-- Returns the number of events written. Ids still pending before their deadline stay indexed;
-- ids no longer pending (or gone) leave the index without an event.
-- Clock: Redis TIME. Publishes nothing (an expired request wakes its waiters by their timers).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 0, (#ARGV / 2) - 1 do
  local id, did = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  local rec, dl, dkey = KEYS[3 + 3 * i], KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score and tonumber(score) <= now then
    local f = redis.call('HMGET', rec, 'status', 'expires_ms')
    if f[1] == 'pending' and now >= tonumber(f[2]) then
      event(rec, id, KEYS[2], KEYS[1], dl, dkey, did, 'expired', now)
      n = n + 1
    else
      redis.call('ZREM', KEYS[1], id)
    end
  end
end
return n
