-- create.lua: create pending elicitations — one, or a batch of the creates that arrived together
-- (src/store/redis/create_batch.rs), each exactly as if created alone.
-- ARGV[1] the number of creates; then, per create: its number of keys, its number of arguments,
--   and those arguments. KEYS: each create's keys, in the same order.
-- Returns one reply per create, in order: {"ok", created_ms, expires_ms}, {"err", "conflict"}
-- (another record under the id: an id collision), or {"fail", message} when a Redis command of
-- that create failed (out of memory, say): the other creates of the batch are not affected.
--
-- One create's keys and arguments:
-- K[1] record hash   K[2] audit list
-- K[3 .. 2+n] review-index keys to point at the id, n = A[10]: legacy records only (review
--   links of the first form), and only on a single Redis (on a Cluster they are in other slots
--   and the caller writes them itself, before this call)
-- With delivery targets, after those: the shard's deadline index, the shard's delivery queue,
--   the record's delivery list, and the `created` event's deliveries (webhook: unused, email,
--   slack; see outbox.lua), whose ids are A[13..15].
-- A[1] expires_in_ms  A[2] retention_ms  A[3] kind  A[4] tenant  A[5] spec JSON
-- A[6] review token hash  A[7] token salt  A[8] actor  A[9] the elicitation id
-- A[10] n, the number of review-index keys
-- A[11] flags: "t" with delivery targets, "a" to start the audit list with its `created`
--   entry (legacy records; otherwise the record itself is that entry, see audit.lua)
-- A[12] the review index's TTL in ms
-- A[13..15] with delivery targets: the `created` delivery ids
-- A[13 or 16 ..] more record fields, as name/value pairs (webhook_url and webhook_result,
--   notify_email, notify_slack, panel and tally: only those the request has)
-- Only what a request uses is passed and written: a plain request is one key (its record) and
-- twelve arguments. Each key a create adds costs Redis about as much as the rest of it
-- (docs/benchmarks.md), hence no index and no audit list until they are needed.
--
-- If the record exists with the same token hash, this is a client retry of a create that
-- already ran: the same answer, nothing written.
-- A record with a webhook or a notification target joins the deadline index, so its "expired"
-- event can be emitted; one with notification targets gets its `created` deliveries (the
-- notifications that carry the review link) in this same step.
-- Clock: Redis TIME, once per call. Keys expire at expires_ms + retention_ms. Publishes nothing.
-- (Milliseconds are whole numbers far below 2^53: '%d' writes them exactly, and costs Redis a
-- fraction of '%.0f'.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)

-- The create whose keys start at KEYS[k + 1] and arguments at ARGV[a + 1] (K[i] below is
-- KEYS[k + i], A[i] is ARGV[a + i]); na arguments.
local function create(k, a, na)
  local rec, audit = KEYS[k + 1], KEYS[k + 2]
  local have = redis.call('HGET', rec, 'token_hash')
  if have then
    if have == ARGV[a + 6] then
      local f = redis.call('HMGET', rec, 'created_ms', 'expires_ms')
      return {'ok', f[1], f[2]}
    end
    return {'err', 'conflict'}
  end
  local id = ARGV[a + 9]
  local exp = now + tonumber(ARGV[a + 1])
  local exps = string.format('%d', exp)
  local n = tonumber(ARGV[a + 10])
  local targets = string.find(ARGV[a + 11], 't', 1, true) ~= nil
  local trail = string.find(ARGV[a + 11], 'a', 1, true) ~= nil
  local extra = targets and 16 or 13
  redis.call('HSET', rec,
    'kind', ARGV[a + 3], 'tenant', ARGV[a + 4], 'status', 'pending',
    'created_ms', nows, 'expires_ms', exps, 'spec', ARGV[a + 5],
    'token_hash', ARGV[a + 6], 'token_salt', ARGV[a + 7])
  if na >= extra then
    redis.call('HSET', rec, unpack(ARGV, a + extra, a + na))
  end
  for i = 3, 2 + n do
    redis.call('SET', KEYS[k + i], id, 'PX', ARGV[a + 12])
  end
  local gone = string.format('%d', exp + tonumber(ARGV[a + 2]))
  redis.call('PEXPIREAT', rec, gone)
  if trail then
    redis.call('RPUSH', audit,
      '{"type":"created","at":' .. nows .. ',"actor":' .. cjson.encode(ARGV[a + 8]) .. '}')
    redis.call('PEXPIREAT', audit, gone)
  end
  if targets then
    local o = k + 3 + n
    event(rec, id, KEYS[o + 1], KEYS[o], KEYS[o + 2], { KEYS[o + 3], KEYS[o + 4], KEYS[o + 5] },
      { ARGV[a + 13], ARGV[a + 14], ARGV[a + 15] }, 'created', now)
    redis.call('ZADD', KEYS[o], exps, id)
  end
  return {'ok', nows, exps}
end

local out = {}
local k, a = 0, 1
for c = 1, tonumber(ARGV[1]) do
  local nk, na = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local ok, r = pcall(create, k, a + 2, na)
  if ok then
    out[c] = r
  else
    out[c] = {'fail', type(r) == 'table' and (r.err or tostring(r)) or tostring(r)}
  end
  k = k + nk
  a = a + 2 + na
end
return out
