-- audit.lua: prepended (by the Rust side) to every script that appends to an audit trail
-- (view, decide, cancel, consume, finish); not loaded on its own.
-- A record's trail is its `created` entry, then the list `<record>:audit`. The `created` entry
-- is the record itself (`created_ms`, `tenant`): the list is made by the first entry after it
-- and takes the record's expiry then. Legacy records (ELICITD_LEGACY_RECORDS, and every record
-- of elicitd 0.1) keep their `created` entry as the first of the list, made with the record.
--
-- audit_count(list): the trail's entries, `created` included, however it is stored.
-- audit_append(rec, list, entry): append `entry` (JSON). A list this makes — or one without
--   an expiry (made by a replica of 0.1 that appended to a newer record) — takes the record's.
--   The caller has checked that the record exists.
local function audit_count(list)
  local n = redis.call('LLEN', list)
  if n > 0 and string.sub(redis.call('LINDEX', list, 0), 1, 17) == '{"type":"created"' then
    return n
  end
  return n + 1
end
local function audit_append(rec, list, entry)
  if redis.call('RPUSH', list, entry) == 1 or redis.call('PTTL', list) == -1 then
    local gone = redis.call('PEXPIRETIME', rec)
    if gone > 0 then
      redis.call('PEXPIREAT', list, gone)
    end
  end
end
