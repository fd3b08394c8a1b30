#!/usr/bin/env bash
# Status, create and await on each Redis topology, in one run (docs/benchmarks.md, "Topologies"):
#   standalone            one redis-server
#   standalone+acks       a primary with one replica, ELICITD_REDIS_REPLICA_ACKS=1
#   cluster               3 primaries + 3 replicas
#   cluster+acks          the same cluster, ELICITD_REDIS_REPLICA_ACKS=1
# For each: two release replicas (A serves the load, B decides for the await scenario), then
#   status (32 connections), create (32 connections), await (1000 parked on A, decided via B).
# Reports (JSON per run, summary.txt) go to $OUT (default /tmp/bench-topologies).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2
fi
source .ci/lib.sh
BIN=${BIN:-"$(target_dir)/release"}
OUT=${OUT:-/tmp/bench-topologies}; rm -rf "$OUT"; mkdir -p "$OUT"
DUR=${DUR:-8s}; WAITERS=${WAITERS:-1000}
KEY=bench-key-0123456789abcdef
ulimit -n 65536 2>/dev/null || true
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null' EXIT
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; $(uptime)"

source loadtest/bench-lib.sh

# Standalone, and a primary with one replica.
redis 21400
redis 21401
redis 21402 --replicaof 127.0.0.1 21401
until redis-cli -p 21402 info replication | grep -q 'master_link_status:up'; do sleep 0.1; done
# A cluster: ports 21410-21415, bus ports +10000 (all below the ephemeral port range, so an
# outgoing connection cannot be holding one).
cluster 21410 21411 21412 21413 21414 21415

LT="$BIN/elicitd-loadtest"
replica() { # port url acks
  ELICITD_LISTEN=127.0.0.1:$1 ELICITD_REDIS_URL=$2 ELICITD_REDIS_REPLICA_ACKS=$3 \
    ELICITD_API_KEYS="bench:$KEY" ELICITD_SECRET=bench-secret-bench-secret-bench-secret \
    ELICITD_CREATE_RATE_PER_SEC=0 ELICITD_MAX_PARKED_AWAITS=20000 ELICITD_LOG_FORMAT=json \
    RUST_LOG=warn "$BIN/elicitd" > "$OUT/replica-$1.log" 2>&1 &
  echo $!
}

one() { # name url acks
  local name=$1 url=$2 acks=$3 a b
  a=$(replica 21201 "$url" "$acks"); b=$(replica 21202 "$url" "$acks")
  for p in 21201 21202; do
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$p/readyz" >/dev/null && break; sleep 0.1; done
  done
  local A=http://127.0.0.1:21201 B=http://127.0.0.1:21202
  for s in status create; do
    "$LT" "$s" --url $A --api-key $KEY --concurrency 32 --duration "$DUR" --json --quiet \
      > "$OUT/$name-$s.json" 2>"$OUT/$name-$s.err"
  done
  "$LT" await --url $A --api-key $KEY --concurrency 32 --duration "$DUR" --json --quiet \
    --waiters "$WAITERS" --hold 5s --decide-url $B > "$OUT/$name-await.json" 2>"$OUT/$name-await.err"
  kill "$a" "$b"; wait "$a" "$b" 2>/dev/null
  python3 - "$OUT" "$name" <<'EOF' | tee -a "$SUMMARY"
import json, sys
out, name = sys.argv[1], sys.argv[2]
def load(s):
    try:
        return json.load(open(f"{out}/{name}-{s}.json"))
    except Exception as e:
        return {"error": str(e)}
st, cr, aw = load("status"), load("create"), load("await")
def fmt(d):
    if "rps" not in d:
        return f"n/a ({d.get('error', '?')})"
    return f"{d['rps']:8.0f} rps p50 {d['p50_ms']:5.2f} ms p99 {d['p99_ms']:6.2f} ms errors {d['errors']}"
w = aw.get("wake") or {}
fs = w.get("from_sent") or {}
wake = (f"woken {w.get('woken')}/{w.get('waiters')} p50 {fs.get('p50_ms', float('nan')):.2f} ms "
        f"p99 {fs.get('p99_ms', float('nan')):.2f} ms" if w else "n/a")
print(f"{name:16} status {fmt(st)} | create {fmt(cr)} | await wake {wake}")
EOF
}

one standalone redis://127.0.0.1:21400 0
one standalone+acks redis://127.0.0.1:21401 1
one cluster "$CLUSTER_URL" 0
one cluster+acks "$CLUSTER_URL" 1
say "load at the end: $(uptime)"
