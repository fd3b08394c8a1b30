-- decide.lua: record a reviewer decision, pending -> submitted | declined; with named reviewers
-- (the record's `panel`), a vote.
-- KEYS[1] record hash (also the shard channel)   KEYS[2] audit list
-- KEYS[3] the shard's delivery queue  KEYS[4] the shard's deadline index
-- KEYS[5] the record's delivery list  KEYS[6..8] this event's deliveries (webhook, email, slack;
-- see outbox.lua)
-- ARGV[1] review token hash  ARGV[2] decision ("submitted"|"declined")  ARGV[3] outcome JSON
-- ARGV[4] actor  ARGV[5] a random nonce of this attempt  ARGV[6] elicitation id
-- ARGV[7..9] this event's delivery ids (webhook, email, slack)
-- Returns {"ok", status, decided_ms} when recorded — also when the record already carries this
--   attempt's nonce: a client that re-sends the command after a lost reply (reconnect,
--   failover) must not be told its own decision was someone else's;
--   {"ok", "pending", submits, quorum} for a named reviewer's submit that leaves the quorum
--   unmet (also for a re-sent one);
--   {"no", status, outcome JSON, decided_ms} when the record is no longer pending (status is
--   the effective one: submitted, declined, consumed, canceled or expired; outcome and
--   decided_ms are nil unless decided), so the caller can show the state without reading again;
--   {"err", "not_found"} for no record or a wrong token; {"err", "already_decided"} when this
--   named reviewer has voted already.
-- Votes: each named reviewer votes once ("voted" audit entry, actor "reviewer:<id>"); a decline,
-- or the submit that reaches the quorum, makes the transition in this same step (status,
-- outcome = that vote's, decidedBy, publish, outbox). Earlier votes change no status and wake
-- no one.
-- Clock: Redis TIME. Publishes the new status on KEYS[1] (SPUBLISH) when it changes, and
-- writes the webhook event "elicitation.<decision>" in the same step (outbox.lua).
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'token_hash', 'outcome',
  'decided_ms', 'decide_nonce', 'panel')
if not f[1] then
  return {'err', 'not_found'}
end
local panel, who = nil, nil
if f[7] then
  panel = cjson.decode(f[7])
  for _, r in ipairs(panel.reviewers) do
    if r.tokenHash == ARGV[1] then who = r.id end
  end
  if not who then
    return {'err', 'not_found'}
  end
elseif f[3] ~= ARGV[1] then
  return {'err', 'not_found'}
end
local st = f[1]
if st ~= 'pending' then
  if f[6] == ARGV[5] then
    return {'ok', ARGV[2], f[5]}
  end
  -- A re-sent vote that counted before another reviewer's vote decided: it was recorded.
  if panel then
    for _, v in ipairs(panel.votes or {}) do
      if v.reviewer == who and v.nonce == ARGV[5] then
        return {'ok', 'pending', '0', tostring(panel.quorum)}
      end
    end
  end
  return {'no', st, f[4] or false, f[5] or false}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(f[2]) then
  return {'no', 'expired', false, false}
end
local nows = string.format('%.0f', now)
local actor = ARGV[4]
if panel then
  local votes = panel.votes or {}
  local yes = 0
  for _, v in ipairs(votes) do
    if v.decision == 'submitted' then yes = yes + 1 end
  end
  for _, v in ipairs(votes) do
    if v.reviewer == who then
      if v.nonce == ARGV[5] then
        return {'ok', 'pending', tostring(yes), tostring(panel.quorum)}
      end
      return {'err', 'already_decided'}
    end
  end
  local vote = { reviewer = who, decision = ARGV[2], at = now, nonce = ARGV[5] }
  local oc = cjson.decode(ARGV[3])
  if type(oc.comment) == 'string' then vote.comment = oc.comment end
  votes[#votes + 1] = vote
  panel.votes = votes
  if ARGV[2] == 'submitted' then yes = yes + 1 end
  actor = 'reviewer:' .. who
  audit_append(KEYS[1], KEYS[2], '{"type":"voted","at":' .. nows .. ',"actor":' ..
    cjson.encode(actor) .. ',"decision":' .. cjson.encode(ARGV[2]) .. '}')
  local tally = tostring(yes) .. '/' .. tostring(panel.quorum)
  if ARGV[2] == 'submitted' and yes < panel.quorum then
    redis.call('HSET', KEYS[1], 'panel', cjson.encode(panel), 'tally', tally)
    return {'ok', 'pending', tostring(yes), tostring(panel.quorum)}
  end
  local by = {}
  if ARGV[2] == 'declined' then
    by[1] = who
  else
    for _, v in ipairs(votes) do
      if v.decision == 'submitted' then by[#by + 1] = v.reviewer end
    end
  end
  panel.decidedBy = by
  redis.call('HSET', KEYS[1], 'panel', cjson.encode(panel), 'tally', tally)
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'outcome', ARGV[3], 'decided_ms', nows,
  'decide_nonce', ARGV[5])
audit_append(KEYS[1], KEYS[2], '{"type":"decided","at":' .. nows .. ',"actor":' ..
  cjson.encode(actor) .. ',"decision":' .. cjson.encode(ARGV[2]) .. '}')
redis.call('SPUBLISH', KEYS[1], ARGV[2])
event(KEYS[1], ARGV[6], KEYS[3], KEYS[4], KEYS[5], { KEYS[6], KEYS[7], KEYS[8] },
  { ARGV[7], ARGV[8], ARGV[9] }, ARGV[2], now)
return {'ok', ARGV[2], nows}
