#!/usr/bin/env bash
# Issue 21's side-by-side: elicitd's status read against what a user would write instead
# (`elicitd-baseline`: one axum handler, one HMGET, no auth/metrics/expiry check — see
# src/bin/baseline.rs), both on one Redis, each with its own /healthz for scale. wrk -t1 -c64 on
# one id, ROUNDS interleaved rounds of DUR each; prints requests/s and the ratios
#   status/healthz (elicitd)   and   elicitd status / baseline status.
# Needs wrk (Debian: apt-get install wrk). Reports go to $OUT (default /tmp/bench-baseline).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v wrk >/dev/null || { echo "bench-baseline: needs wrk (apt-get install wrk)" >&2; exit 2; }
cargo build --release --locked -p elicitd -p elicitd-loadtest >&2 || exit 1
source .ci/lib.sh
BIN="$(target_dir)/release"
OUT=${OUT:-/tmp/bench-baseline}; rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-8s}; CONC=${CONC:-64}
RP=$(free_port); EP=$(free_port); BP=$(free_port); KEY=bench-key-0123456789abcdef
redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" --daemonize no > "$OUT/redis.log" 2>&1 &
RPID=$!
sleep 0.5
ELICITD_LISTEN=127.0.0.1:$EP ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" \
  ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
  ELICITD_LOG_FORMAT=json RUST_LOG=warn "$BIN/elicitd" > "$OUT/elicitd.log" 2>&1 &
EPID=$!
REDIS_URL=redis://127.0.0.1:$RP LISTEN=127.0.0.1:$BP "$BIN/elicitd-baseline" > "$OUT/baseline.log" 2>&1 &
BPID=$!
trap 'kill $EPID $BPID $RPID 2>/dev/null; wait $EPID $BPID $RPID 2>/dev/null' EXIT
for p in $EP $BP; do for _ in $(seq 100); do curl -sf http://127.0.0.1:$p/healthz >/dev/null && break; sleep 0.1; done; done
ID=$(curl -sf -XPOST http://127.0.0.1:$EP/v1/approvals -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' -d '{"message":"bench","context":{"n":1},"expiresInSeconds":86400}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["elicitationId"])')
curl -sf http://127.0.0.1:$BP/v1/elicitations/$ID >/dev/null || { echo "baseline cannot read $ID" >&2; exit 1; }
rps() { wrk -t1 -c"$CONC" -d"$DUR" "$@" 2>/dev/null | awk '/Requests\/sec/{print $2}'; }
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; wrk -t1 -c$CONC -d$DUR, one id; $(uptime)"
for r in $(seq "$ROUNDS"); do
  eh=$(rps http://127.0.0.1:$EP/healthz)
  es=$(rps -H "Authorization: Bearer $KEY" http://127.0.0.1:$EP/v1/elicitations/$ID)
  bh=$(rps http://127.0.0.1:$BP/healthz)
  bs=$(rps http://127.0.0.1:$BP/v1/elicitations/$ID)
  python3 - "$r" "$eh" "$es" "$bh" "$bs" <<'PY' | tee -a "$SUMMARY"
import sys
r, eh, es, bh, bs = sys.argv[1], *map(float, sys.argv[2:])
print(f"round {r}: elicitd healthz {eh:9.0f}  status {es:9.0f}  | baseline healthz {bh:9.0f}  status {bs:9.0f}"
      f"  | status/healthz {es/eh:4.2f}  elicitd/baseline status {es/bs:4.2f}  healthz {eh/bh:4.2f}")
PY
done
