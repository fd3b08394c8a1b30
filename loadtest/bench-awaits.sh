#!/usr/bin/env bash
# Issue 21's parked-await target: WAITERS (default 10 000) awaits parked on replica A, held, then
# decided through replica B; reports A's RSS per parked await (VmRSS with them parked minus
# VmRSS idle after a warm-up, divided by the parked count) and the wake latency from the deciding
# call's response. TOPOLOGY=standalone (default) or cluster (3 primaries + 3 replicas).
# BIN=<dir> benchmarks another build. Reports go to $OUT (default /tmp/bench-awaits).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2 || exit 1
fi
source .ci/lib.sh
BIN=${BIN:-"$(target_dir)/release"}
OUT=${OUT:-/tmp/bench-awaits}; rm -rf "$OUT"; mkdir -p "$OUT"
WAITERS=${WAITERS:-10000}; TOPOLOGY=${TOPOLOGY:-standalone}; HOLD=${HOLD:-10s}
KEY=bench-key-0123456789abcdef
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" -ge $((WAITERS + 1000)) ] || { echo "bench-awaits: ulimit -n $(ulimit -n) is below WAITERS+1000" >&2; exit 2; }
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; $TOPOLOGY; $WAITERS waiters; $(uptime)"

source loadtest/bench-lib.sh
case "$TOPOLOGY" in
  standalone)
    P=$(free_port); redis "$P"; RPID=${PIDS[-1]}; URL="redis://127.0.0.1:$P" ;;
  cluster)
    cluster 21510 21511 21512 21513 21514 21515; URL=$CLUSTER_URL ;;
  *) echo "TOPOLOGY is standalone or cluster" >&2; exit 2 ;;
esac
AP=$(free_port); BP=$(free_port)
start() { ELICITD_LISTEN=127.0.0.1:$1 ELICITD_REDIS_URL=$URL ELICITD_API_KEYS="bench:$KEY" \
  ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
  ELICITD_MAX_PARKED_AWAITS=$((WAITERS * 2)) ELICITD_MAX_CONNECTIONS=$((WAITERS * 2)) \
  ELICITD_LOG_FORMAT=json RUST_LOG=warn "$BIN/elicitd" > "$OUT/replica-$1.log" 2>&1 & echo $!; }
APID=$(start $AP); BPID=$(start $BP); PIDS+=("$APID" "$BPID")
for p in $AP $BP; do for _ in $(seq 100); do curl -sf http://127.0.0.1:$p/readyz >/dev/null && break; sleep 0.1; done; done
A=http://127.0.0.1:$AP; B=http://127.0.0.1:$BP
LT=${LT:-"$BIN/elicitd-loadtest"}
rss() { awk '/VmRSS/{print $2}' /proc/$1/status; }
# Warm-up: the same kinds of requests as the run (creates, short awaits), so allocator pools and
# lazily built state exist before the idle reading.
"$LT" await --url $A --api-key $KEY --concurrency 32 --waiters 500 --hold 1s --decide-url $B --json --quiet > "$OUT/warmup.json" || true
sleep 1
IDLE=$(rss $APID)
"$LT" await --url $A --api-key $KEY --concurrency "${CONC:-32}" --waiters "$WAITERS" --hold "$HOLD" --decide-url $B --decide-rate "${RATE:-0}" --json --quiet > "$OUT/await.json" &
LPID=$!
# Sample once every await is parked (the tool waits for the gauge, then holds).
PARKED=0
for _ in $(seq 600); do
  PARKED=$(curl -s $A/metrics | awk '/^elicitd_awaits_parked /{print $2}')
  [ "${PARKED:-0}" -ge "$WAITERS" ] && break
  sleep 0.1
done
sleep 0.5
FULL=$(rss $APID)
PARKED=$(curl -s $A/metrics | awk '/^elicitd_awaits_parked /{print $2}')
RPID=${RPID:-}
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
T0="$(ticks $APID) $(ticks $BPID) $(ticks $RPID 2>/dev/null || echo 0)"
[ -n "${PERF_A:-}" ] && perf record -F 999 --call-graph dwarf,16384 -p $APID -o "$OUT/perf-a.data" -- sleep "$PERF_A" >/dev/null 2>&1 &
wait $LPID; RC=$?
T1="$(ticks $APID) $(ticks $BPID) $(ticks $RPID 2>/dev/null || echo 0)"
# The replica's own view: decision time on the store clock -> await answered.
curl -s $A/metrics | grep '^elicitd_await_wake_seconds' > "$OUT/wake-metric.txt"
[ "${PARKED:-0}" -ge "$WAITERS" ] || { echo "bench-awaits: only ${PARKED:-0} parked when RSS was read (raise HOLD)" >&2; exit 1; }
python3 - "$OUT/await.json" "$IDLE" "$FULL" "$PARKED" "$RC" "$T0" "$T1" "$(getconf CLK_TCK)" <<'PY' | tee -a "$SUMMARY"
import json, sys
f, idle, full, parked, rc = sys.argv[1], *map(int, sys.argv[2:6])
t0, t1, hz = [int(x) for x in sys.argv[6].split()], [int(x) for x in sys.argv[7].split()], int(sys.argv[8])
d = json.load(open(f))
w = d.get("wake") or {}
r, s = w.get("from_returned", {}), w.get("from_sent", {})
per = (full - idle) / parked if parked else float("nan")
print(f"rss idle {idle} KB, with {parked} parked {full} KB: {per:.1f} KB per parked await (target <= 12)")
print(f"wake from the decision's response: p50 {r.get('p50_ms', 0):.2f} ms, p99 {r.get('p99_ms', 0):.2f} ms"
      f" (target <= 5), max {r.get('max_ms', 0):.2f} ms; from sent p50 {s.get('p50_ms', 0):.2f} p99 {s.get('p99_ms', 0):.2f} ms;"
      f" woke {w.get('woken')}/{w.get('waiters')}; errors {d.get('errors')}; exit {rc}")
cpu = [(b - a) * 1e6 / hz / parked for a, b in zip(t0, t1)] if parked else []
if cpu:
    print(f"CPU per decided await while holding and deciding: A (woken) {cpu[0]:.0f} us, B (deciding) {cpu[1]:.0f} us"
          + (f", Redis {cpu[2]:.0f} us" if len(cpu) > 2 and t1[2] else ""))
PY
