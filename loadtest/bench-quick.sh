#!/usr/bin/env bash
# The benchmark behind docs/benchmarks.md: one Redis and two release replicas (A, B) on free
# loopback ports, then
#   - /healthz and status on A, interleaved, ROUNDS rounds at 32 and at 128 connections, with the
#     CPU each process spent per request (from /proc/<pid>/stat) — ratios are per round;
#   - redis-benchmark of the commands a status read runs (the read script, for 1 and 8 records,
#     and a bare HMGET / TIME for reference);
#   - create; await (3000 parked on A, decided via B; RSS and Redis connections sampled); mixed.
# Reports (JSON per run, summary.txt) go to $OUT (default /tmp/bench-out).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# BIN=<dir with elicitd and elicitd-loadtest> benchmarks other binaries (e.g. a baseline build
# of another commit); by default this workspace's release build.
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2
fi
ulimit -n 65536 2>/dev/null || echo "warning: could not raise the open-file limit (await needs ~7000)" >&2
source .ci/lib.sh
BIN=${BIN:-"$(target_dir)/release"}
OUT=${OUT:-/tmp/bench-out}; rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-8s}
RP=$(free_port); AP=$(free_port); BP=$(free_port); KEY=bench-key-0123456789abcdef
# A previous run's server may still be exiting: wait for the port.
for _ in $(seq 100); do redis-cli -p $RP ping >/dev/null 2>&1 || break; sleep 0.1; done
redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --maxclients 50000 --dir "$OUT" --daemonize no > "$OUT/redis.log" 2>&1 &
RPID=$!
sleep 0.5
start() { ELICITD_LISTEN=127.0.0.1:$1 ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" ELICITD_SECRET=bench-secret-bench-secret-bench-secret \
  ELICITD_CREATE_RATE_PER_SEC=0 ELICITD_MAX_PARKED_AWAITS=20000 ELICITD_LOG_FORMAT=json RUST_LOG=warn $BIN/elicitd > "$OUT/replica-$1.log" 2>&1 & echo $!; }
APID=$(start $AP); BPID=$(start $BP)
trap 'kill $APID $BPID $RPID 2>/dev/null; wait $APID $BPID $RPID 2>/dev/null' EXIT
for p in $AP $BP; do for _ in $(seq 100); do curl -sf http://127.0.0.1:$p/readyz >/dev/null && break; sleep 0.1; done; done
LT="$BIN/elicitd-loadtest"
A=http://127.0.0.1:$AP; B=http://127.0.0.1:$BP
rss() { awk '/VmRSS/{print $2}' /proc/$1/status; }
clients() { redis-cli -p $RP info clients | awk -F: '/connected_clients/{print $2}' | tr -d '\r'; }
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
HZ=$(getconf CLK_TCK)
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; $(uptime)"

# One timed run of `scenario` at `conc` connections; CPU per request sampled over its middle.
run() {
  local scenario=$1 conc=$2 tag=$3 secs=${DUR%s}
  $LT "$scenario" --url $A --api-key $KEY --concurrency "$conc" --duration "$DUR" --json --quiet > "$OUT/$tag.json" &
  local lpid=$! a0 r0 l0 a1 r1 l1 win=$((secs - 3))
  sleep 2; a0=$(ticks $APID); r0=$(ticks $RPID); l0=$(ticks $lpid)
  sleep $win; a1=$(ticks $APID); r1=$(ticks $RPID); l1=$(ticks $lpid)
  wait $lpid
  python3 - "$OUT/$tag.json" $((a1 - a0)) $((r1 - r0)) $((l1 - l0)) "$win" "$HZ" "$tag" <<'EOF' | tee -a "$SUMMARY"
import json, sys
f, a, r, l, win, hz, tag = sys.argv[1], *map(int, sys.argv[2:7]), sys.argv[7]
d = json.load(open(f))
rps = d["rps"]
us = lambda t: t / hz / win * 1e6 / rps
d["cpu_us_per_request"] = {"replica": round(us(a), 1), "redis": round(us(r), 1), "loadgen": round(us(l), 1)}
json.dump(d, open(f, "w"))
print(f"{tag:14} {rps:9.0f} rps  p50 {d['p50_ms']:6.2f} ms  p99 {d['p99_ms']:6.2f} ms  errors {d['errors']}  "
      f"cpu us/req: replica {us(a):5.1f} redis {us(r):5.1f} loadgen {us(l):5.1f}")
EOF
}

for conc in 32 128; do
  for i in $(seq "$ROUNDS"); do
    run healthz $conc healthz-c$conc-$i
    run status $conc status-c$conc-$i
  done
done
python3 - "$OUT" "$ROUNDS" <<'EOF' | tee -a "$SUMMARY"
import json, sys, statistics
out, rounds = sys.argv[1], int(sys.argv[2])
for c in (32, 128):
    h = [json.load(open(f"{out}/healthz-c{c}-{i}.json"))["rps"] for i in range(1, rounds + 1)]
    s = [json.load(open(f"{out}/status-c{c}-{i}.json"))["rps"] for i in range(1, rounds + 1)]
    ratios = [b / a for a, b in zip(h, s)]
    print(f"c={c}: healthz median {statistics.median(h):.0f} rps, status median {statistics.median(s):.0f} rps, "
          f"status/healthz per round {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
EOF

# Raw Redis, same server, 32 clients: the read script as a status read sends it (1 record, and a
# batch of 8), and the bare commands it runs.
redis-cli -p $RP hset benchkey tenant t status pending kind approval created_ms 1 expires_ms 2 decided_ms 3 >/dev/null
SHA=$(redis-cli -p $RP script load "$(cat lua/read.lua)")
F6="6 tenant status kind created_ms expires_ms decided_ms"
rb() { redis-benchmark -p $RP -c 32 -n "$1" -q "${@:2}" 2>/dev/null | tr '\r' '\n' | tail -1; }
say "redis-benchmark read.lua x1: $(rb 200000 evalsha "$SHA" 1 benchkey $F6 | grep -o '[0-9.]* requests per second.*')"
# shellcheck disable=SC2046
say "redis-benchmark read.lua x8: $(rb 50000 evalsha "$SHA" 8 $(for _ in $(seq 8); do printf 'benchkey '; done) $(for _ in $(seq 8); do printf '%s ' "$F6"; done) | grep -o '[0-9.]* requests per second.*') (x8 records per call)"
say "redis-benchmark HMGET: $(rb 300000 hmget benchkey tenant status kind created_ms expires_ms decided_ms | grep -o '[0-9.]* requests per second.*')"
say "redis-benchmark TIME: $(rb 300000 time | grep -o '[0-9.]* requests per second.*')"

run create 32 create
echo "rss_idle_kb=$(rss $APID) clients_idle=$(clients)" > "$OUT/rss.txt"
$LT await --url $A --api-key $KEY --concurrency 32 --duration 8s --json --quiet --waiters 3000 --hold 10s --decide-url $B > "$OUT/await.json" &
LPID=$!
sleep 9
echo "rss_parked_kb=$(rss $APID) clients_parked=$(clients) parked=$(curl -s $A/metrics | awk '/^elicitd_awaits_parked /{print $2}')" >> "$OUT/rss.txt"
wait $LPID
$LT mixed --url $A --api-key $KEY --concurrency 32 --duration "$DUR" --json --quiet --decide-url $B > "$OUT/mixed.json"
say "await: $(head -c 900 "$OUT/await.json")"
say "mixed: $(head -c 600 "$OUT/mixed.json")"
say "$(cat "$OUT/rss.txt")"
say "load at the end: $(uptime)"
