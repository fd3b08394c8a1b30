#!/usr/bin/env bash
# Issue 21's targets, each measured and judged in one command:
#   status-wrk   status >= 0.75 x /healthz under wrk -t1 -c64, 1000 ids     (bench-baseline.sh)
#   baseline     status >= 1.0 x the naive axum + fred baseline, same run   (bench-baseline.sh)
#   status-lt    status >= 0.75 x /healthz with the load tool, 1000 ids, c64
#   redis-cpu    Redis CPU per status read <= 4 us (load tool run above)
#   create       >= 25 000 creates/s on one replica (load tool, c64)
#   awaits       10 000 parked awaits: <= 12 KB RSS each, wake p99 <= 5 ms  (bench-awaits.sh),
#                decisions through the other replica at RATE per second (default 1000); the same
#                run flat out (32 deciders, both cores full) is printed beside it, not judged
#   awaits-cluster  the same on a 3-primary Redis Cluster
# TARGETS="status-wrk baseline ..." picks some (default: all). ROUNDS, DUR as in the others.
# BIN=<dir> benchmarks another build; LT=<path> takes the load tool from elsewhere (an older
# build with today's tool, for before/after). Reports under $OUT (default /tmp/bench-targets);
# the verdicts in $OUT/targets.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2 || exit 1
fi
source .ci/lib.sh
export BIN=${BIN:-"$(target_dir)/release"}
export LT=${LT:-"$BIN/elicitd-loadtest"}
OUT=${OUT:-/tmp/bench-targets}; rm -rf "$OUT"; mkdir -p "$OUT"
export ROUNDS=${ROUNDS:-3} DUR=${DUR:-8s}
TARGETS=${TARGETS:-"status-wrk baseline status-lt redis-cpu create awaits awaits-cluster"}
want() { [[ " $TARGETS " == *" $1 "* ]]; }
VERDICTS="$OUT/targets.txt"; : > "$VERDICTS"
verdict() { # name measured target met(0/1)
  local m=not; [ "$4" = 1 ] && m=""
  printf '%-15s %-48s target %-12s %s\n' "$1" "$2" "$3" "${m:+NOT }met" | tee -a "$VERDICTS"
}
echo "machine: $(nproc) cores; $(uptime)" | tee -a "$VERDICTS"

if want status-wrk || want baseline; then
  OUT="$OUT/baseline" IDS=1000 bash loadtest/bench-baseline.sh > /dev/null || exit 1
  read -r swrk sbase < <(python3 - "$OUT/baseline/summary.txt" <<'PY'
import re, statistics, sys
t = open(sys.argv[1]).read()
# This build's rounds only (with BEFORE= each round also has a "before:" line).
rows = [l for l in t.splitlines() if l.startswith("round ")]
r1 = [float(x) for l in rows for x in re.findall(r"status/healthz (\d\.\d+)", l)]
r2 = [float(x) for l in rows for x in re.findall(r"elicitd/baseline status (\d\.\d+)", l)]
print(statistics.median(r1), statistics.median(r2))
PY
)
  want status-wrk && verdict status-wrk "status/healthz median $swrk (wrk, 1000 ids)" ">= 0.75" \
    "$(python3 -c "print(int($swrk >= 0.75))")"
  want baseline && verdict baseline "elicitd/baseline status median $sbase" ">= 1.0" \
    "$(python3 -c "print(int($sbase >= 1.0))")"
fi

if want status-lt || want redis-cpu || want create; then
  RP=$(free_port); AP=$(free_port); KEY=bench-key-0123456789abcdef
  redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" --daemonize no > "$OUT/redis.log" 2>&1 &
  RPID=$!
  sleep 0.5
  ELICITD_LISTEN=127.0.0.1:$AP ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" \
    ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
    ELICITD_LOG_FORMAT=json RUST_LOG=warn "$BIN/elicitd" > "$OUT/replica.log" 2>&1 &
  APID=$!
  trap 'kill $APID $RPID 2>/dev/null; wait $APID $RPID 2>/dev/null' EXIT
  for _ in $(seq 100); do curl -sf http://127.0.0.1:$AP/readyz >/dev/null && break; sleep 0.1; done
  lt() { "$LT" "$1" --url http://127.0.0.1:$AP --api-key $KEY --concurrency 64 \
    --duration "$DUR" --json --quiet --cpu replica=$APID --cpu redis=$RPID "${@:2}"; }
  for i in $(seq "$ROUNDS"); do
    lt healthz > "$OUT/healthz-$i.json" || exit 1
    lt status --seed 1000 > "$OUT/status-$i.json" || exit 1
  done
  lt create > "$OUT/create.json" || exit 1
  python3 - "$OUT" "$ROUNDS" <<'PY' > "$OUT/lt.txt"
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
h = [json.load(open(f"{out}/healthz-{i}.json")) for i in range(1, n + 1)]
s = [json.load(open(f"{out}/status-{i}.json")) for i in range(1, n + 1)]
c = json.load(open(f"{out}/create.json"))
ratio = statistics.median(b["rps"] / a["rps"] for a, b in zip(h, s))
redis = statistics.median(x["cpu_us_per_request"]["redis"] for x in s)
rep = statistics.median(x["cpu_us_per_request"]["replica"] for x in s)
print(ratio, redis, rep, c["rps"], c["cpu_us_per_request"]["replica"], c["cpu_us_per_request"]["redis"])
PY
  read -r ratio redis rep crps crep credis < "$OUT/lt.txt"
  want status-lt && verdict status-lt "status/healthz median $(printf %.2f "$ratio") (load tool, c64)" ">= 0.75" \
    "$(python3 -c "print(int($ratio >= 0.75))")"
  want redis-cpu && verdict redis-cpu "Redis $redis us per status read (replica $rep)" "<= 4 us" \
    "$(python3 -c "print(int($redis <= 4))")"
  want create && verdict create "$(printf %.0f "$crps") creates/s (replica $crep us, Redis $credis us each)" ">= 25000/s" \
    "$(python3 -c "print(int($crps >= 25000))")"
  kill $APID $RPID 2>/dev/null; wait $APID $RPID 2>/dev/null; trap - EXIT
fi

for topo in standalone cluster; do
  name=awaits; [ $topo = cluster ] && name=awaits-cluster
  want $name || continue
  OUT="$OUT/$name" TOPOLOGY=$topo RATE=${RATE:-1000} bash loadtest/bench-awaits.sh > /dev/null || exit 1
  OUT="$OUT/$name-flat-out" TOPOLOGY=$topo RATE=0 bash loadtest/bench-awaits.sh > /dev/null || exit 1
  read -r kb p99 < <(python3 - "$OUT/$name/summary.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
print(re.search(r"([\d.]+) KB per parked await", t).group(1), re.search(r"response: p50 [\d.]+ ms, p99 ([\d.]+) ms", t).group(1))
PY
)
  flat=$(grep -o 'p99 [0-9.]* ms (target' "$OUT/$name-flat-out/summary.txt" | head -1 | awk '{print $2}')
  verdict $name "$kb KB per parked await, wake p99 $p99 ms at ${RATE:-1000}/s" "<= 12 KB, 5 ms" \
    "$(python3 -c "print(int($kb <= 12 and $p99 <= 5))")"
  echo "$name         (flat out, 32 deciders: wake p99 $flat ms; not judged)" | tee -a "$VERDICTS"
done
