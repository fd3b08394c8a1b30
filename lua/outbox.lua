-- outbox.lua: prepended (by the Rust side) to every script that makes a transition; not loaded
-- on its own. The transactional outbox: the events of a transition (its webhook and its
-- notifications) are written by the same atomic script that makes it, so neither can exist
-- without the other.
--
-- event(rec, id, dq, ex, dl, dkeys, dids, etype, now): for each channel the record has a target
-- for and that takes this event, write delivery dids[c] (JSON) at dkeys[c] unless it exists
-- (one delivery per transition and channel, ever), queue it due now on `dq`, list it on the
-- record's `dl`. Channels, in the order of dkeys/dids: 1 webhook (every event but `created`),
-- 2 email and 3 slack (`created`, then the follow-ups submitted, declined, canceled, expired;
-- not `consumed`). Unless etype is `created`, drop the id from the deadline index `ex` (the
-- request is not pending any more). Deliveries expire with their record.
local notice_events = { created = true, submitted = true, declined = true, canceled = true,
  expired = true }
local function event(rec, id, dq, ex, dl, dkeys, dids, etype, now)
  if etype ~= 'created' then
    redis.call('ZREM', ex, id)
  end
  local w = redis.call('HMGET', rec, 'webhook_url', 'webhook_result', 'kind', 'tenant',
    'decided_ms', 'notify_email', 'notify_slack')
  local gone = redis.call('PEXPIRETIME', rec)
  if gone < 0 then gone = now + 86400000 end
  local function write(c, fields)
    if redis.call('EXISTS', dkeys[c]) == 1 then
      return
    end
    local d = {
      id = dids[c], elicitationId = id, type = etype, kind = w[3], tenant = w[4],
      eventMs = now, state = 'pending', nextAt = now
    }
    if w[5] then d.decidedMs = tonumber(w[5]) end
    for k, v in pairs(fields) do d[k] = v end
    redis.call('SET', dkeys[c], cjson.encode(d), 'PXAT', gone)
    redis.call('ZADD', dq, now, dids[c])
    redis.call('RPUSH', dl, dids[c])
    redis.call('PEXPIREAT', dl, gone)
  end
  if w[1] and w[1] ~= '' and etype ~= 'created' then
    write(1, { channel = 'webhook', url = w[1], includeResult = (w[2] == '1') })
  end
  if notice_events[etype] then
    if w[6] and w[6] ~= '' then
      write(2, { channel = 'email', url = '', to = cjson.decode(w[6]), includeResult = false })
    end
    if w[7] and w[7] ~= '' then
      write(3, { channel = 'slack', url = w[7], includeResult = false })
    end
  end
end
