-- outbox.lua: prepended (by the Rust side) to every script that makes a transition; not loaded
-- on its own. The transactional outbox: the webhook event of a transition is written by the
-- same atomic script that makes it, so neither can exist without the other.
--
-- event(rec, id, dq, ex, dl, dkey, did, etype, now): if the record has a webhook target, write
-- delivery `did` (JSON) at `dkey` unless it exists (one event per transition, ever), queue it
-- due now on `dq`, list it on the record's `dl`; always drop the id from the deadline index
-- `ex` (the request is not pending any more). Deliveries expire with their record.
local function event(rec, id, dq, ex, dl, dkey, did, etype, now)
  redis.call('ZREM', ex, id)
  local w = redis.call('HMGET', rec, 'webhook_url', 'webhook_result', 'kind', 'tenant',
    'decided_ms')
  if not w[1] or w[1] == '' or redis.call('EXISTS', dkey) == 1 then
    return
  end
  local d = {
    id = did, elicitationId = id, type = etype, kind = w[3], tenant = w[4], url = w[1],
    includeResult = (w[2] == '1'), eventMs = now, state = 'pending', nextAt = now
  }
  if w[5] then d.decidedMs = tonumber(w[5]) end
  local gone = redis.call('PEXPIRETIME', rec)
  if gone < 0 then gone = now + 86400000 end
  redis.call('SET', dkey, cjson.encode(d), 'PXAT', gone)
  redis.call('ZADD', dq, now, did)
  redis.call('RPUSH', dl, did)
  redis.call('PEXPIREAT', dl, gone)
end
