-- expire.lua: emit "elicitation.expired" for requests whose deadline passed undecided
-- (`expired` itself is never written: the status stays computed). Exactly once across the
-- fleet: an id leaves the deadline index in the same step as its events are written.
-- KEYS[1] the shard's deadline index   KEYS[2] the shard's delivery queue
-- then for each id i (0-based): KEYS[3+5i] record, KEYS[4+5i] its delivery list,
-- KEYS[5+5i..7+5i] its expiry event's deliveries (webhook, email, slack)
-- ARGV for each id i: ARGV[1+4i] the id, ARGV[2+4i..4+4i] its expiry event's delivery ids
-- Returns the number of records whose events were written. Ids still pending before their
-- deadline stay indexed; ids no longer pending (or gone) leave the index without an event.
-- Clock: Redis TIME. Publishes nothing (an expired request wakes its waiters by their timers).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 0, (#ARGV / 4) - 1 do
  local id = ARGV[1 + 4 * i]
  local rec, dl = KEYS[3 + 5 * i], KEYS[4 + 5 * i]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score and tonumber(score) <= now then
    local f = redis.call('HMGET', rec, 'status', 'expires_ms')
    if f[1] == 'pending' and now >= tonumber(f[2]) then
      event(rec, id, KEYS[2], KEYS[1], dl, { KEYS[5 + 5 * i], KEYS[6 + 5 * i], KEYS[7 + 5 * i] },
        { ARGV[2 + 4 * i], ARGV[3 + 4 * i], ARGV[4 + 4 * i] }, 'expired', now)
      n = n + 1
    else
      redis.call('ZREM', KEYS[1], id)
    end
  end
end
return n
