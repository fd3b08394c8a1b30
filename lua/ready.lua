-- ready.lua: readiness probe. Proves the scripting engine answers (and reloads after a flush).
-- KEYS none   ARGV none   Returns "ok". Touches no data, publishes nothing.
return 'ok'
