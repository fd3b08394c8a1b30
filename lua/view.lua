-- view.lua: append a "viewed" audit event when a reviewer opens the page. No state change.
-- KEYS[1] record hash   KEYS[2] audit list
-- ARGV[1] review token hash   ARGV[2] actor   ARGV[3] most audit entries to append a view to
-- Returns {"ok"} or {"err", "not_found"}. Clock: Redis TIME. Publishes nothing.
-- Views are recorded only while the audit trail has fewer than ARGV[3] entries, so whoever holds
-- the link cannot grow the record without bound by reloading the page.
-- With named reviewers (a `panel`), their token hashes open the page instead.
local f = redis.call('HMGET', KEYS[1], 'token_hash', 'panel')
if f[2] then
  local known = false
  for _, r in ipairs(cjson.decode(f[2]).reviewers) do
    if r.tokenHash == ARGV[1] then known = true end
  end
  if not known then
    return {'err', 'not_found'}
  end
elseif f[1] ~= ARGV[1] then
  return {'err', 'not_found'}
end
if audit_count(KEYS[2]) >= tonumber(ARGV[3]) then
  return {'ok'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
audit_append(KEYS[1], KEYS[2], '{"type":"viewed","at":' .. string.format('%.0f', now) ..
  ',"actor":' .. cjson.encode(ARGV[2]) .. '}')
return {'ok'}
