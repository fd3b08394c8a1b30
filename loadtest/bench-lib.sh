# Shared by the bench-*.sh scripts (sourced, not run). `redis` and `cluster` need OUT (report
# directory) and a PIDS array (killed on exit by the caller's trap).

# redis <port> [redis-server args...]: start one server in $OUT/redis-<port>, wait for PING.
redis() {
  local port=$1; shift
  mkdir -p "$OUT/redis-$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxclients 50000 \
    --dir "$OUT/redis-$port" --daemonize no "$@" > "$OUT/redis-$port.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis on $port did not start" >&2; exit 1
}

# cluster <port>... (six): 3 primaries + 3 replicas, ready and with replicas in sync; sets
# CLUSTER_URL. Keep the ports below the ephemeral range (bus ports are +10000).
cluster() {
  local p
  for p in "$@"; do
    redis "$p" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000
  done
  redis-cli --cluster create $(for p in "$@"; do printf '127.0.0.1:%s ' "$p"; done) \
    --cluster-replicas 1 --cluster-yes > "$OUT/cluster-create.log" 2>&1
  for p in "$@"; do
    until redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok'; do sleep 0.1; done
  done
  for p in "$@"; do
    while redis-cli -p "$p" info replication | grep -q 'role:slave' \
      && ! redis-cli -p "$p" info replication | grep -q 'master_link_status:up'; do sleep 0.1; done
  done
  local nodes
  nodes=$(printf '&node=127.0.0.1:%s' "${@:2}")
  CLUSTER_URL="redis-cluster://127.0.0.1:$1?${nodes#&}"
}

# seed_ids <port> <api key> <n>: create n pending approvals on the replica at 127.0.0.1:<port>
# and print their ids, one per line.
seed_ids() {
  python3 - "$1" "$2" "$3" <<'PY'
import http.client, json, sys
port, key, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port)
body = json.dumps({"message": "bench", "context": {"n": 1}, "expiresInSeconds": 86400})
for _ in range(n):
    c.request("POST", "/v1/approvals", body, {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 201, r.status
    print(json.loads(r.read())["elicitationId"])
PY
}

# ids_lua <ids file>: a wrk script polling those ids round-robin. The requests are formatted
# once, in init (after -H is applied): wrk's own CPU per request is part of what the machine
# spends, and formatting each request anew cost wrk ~1.5 µs per poll.
ids_lua() {
  cat <<LUA
local reqs = {}
init = function(args)
  for line in io.lines("$1") do
    reqs[#reqs + 1] = wrk.format("GET", "/v1/elicitations/" .. line)
  end
end
local i = 0
request = function()
  i = i % #reqs + 1
  return reqs[i]
end
LUA
}
