# Shared by the bench-*.sh scripts that start their own Redis topologies (sourced, not run).
# Needs OUT (report directory) and a PIDS array (killed on exit by the caller's trap).

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
