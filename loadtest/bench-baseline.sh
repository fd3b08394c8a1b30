#!/usr/bin/env bash
# Issue 21's side-by-side: elicitd's status read against what a user would write instead
# (`elicitd-baseline`: one axum handler, one HMGET, no auth/metrics/expiry check — see
# src/bin/baseline.rs), both on one Redis, each with its own /healthz for scale. wrk -t1 -c64
# polling IDS ids round-robin (default 1000; IDS=1 polls one), ROUNDS interleaved rounds of DUR each; prints requests/s, the CPU each process spent per
# request (server, Redis, wrk; from /proc/<pid>/stat over the whole run) and the ratios
#   status/healthz (elicitd)   and   elicitd status / baseline status.
# BEFORE=<dir holding an older elicitd build> adds that build as a third server in every round
# (before/after in one run). Needs wrk (Debian: apt-get install wrk). Reports go to $OUT
# (default /tmp/bench-baseline).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v wrk >/dev/null || { echo "bench-baseline: needs wrk (apt-get install wrk)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-baseline: needs GNU time for wrk's CPU (apt-get install time)" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2 || exit 1
fi
source .ci/lib.sh
source loadtest/bench-lib.sh
BIN=${BIN:-"$(target_dir)/release"}
BEFORE=${BEFORE:-}
OUT=${OUT:-/tmp/bench-baseline}; rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-8s}; CONC=${CONC:-64}
RP=$(free_port); EP=$(free_port); BP=$(free_port); OP=$(free_port); KEY=bench-key-0123456789abcdef
redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" --daemonize no > "$OUT/redis.log" 2>&1 &
RPID=$!
sleep 0.5
start() { ELICITD_LISTEN=127.0.0.1:$1 ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" \
  ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
  ELICITD_LOG_FORMAT=json RUST_LOG=warn "$2" > "$OUT/elicitd-$1.log" 2>&1 & echo $!; }
EPID=$(start $EP "$BIN/elicitd")
OPID=""
[ -n "$BEFORE" ] && OPID=$(start $OP "$BEFORE/elicitd")
REDIS_URL=redis://127.0.0.1:$RP LISTEN=127.0.0.1:$BP "$BIN/elicitd-baseline" > "$OUT/baseline.log" 2>&1 &
BPID=$!
trap 'kill $EPID $OPID $BPID $RPID 2>/dev/null; wait $EPID $OPID $BPID $RPID 2>/dev/null' EXIT
PORTS="$EP $BP"; [ -n "$BEFORE" ] && PORTS="$PORTS $OP"
for p in $PORTS; do for _ in $(seq 100); do curl -sf http://127.0.0.1:$p/healthz >/dev/null && break; sleep 0.1; done; done
IDS=${IDS:-1000}
seed_ids "$EP" "$KEY" "$IDS" > "$OUT/ids.txt" || { echo "bench-baseline: seeding failed" >&2; exit 1; }
ID=$(head -1 "$OUT/ids.txt")
curl -sf http://127.0.0.1:$BP/v1/elicitations/$ID >/dev/null || { echo "baseline cannot read $ID" >&2; exit 1; }
# wrk polls the ids round-robin.
ids_lua "$OUT/ids.txt" > "$OUT/ids.lua"
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
HZ=$(getconf CLK_TCK)
# run <server pid> <wrk args...>: prints "rps server_us redis_us wrk_us" (CPU µs per request).
run() {
  local spid=$1; shift
  local s0 r0 s1 r1 out
  s0=$(ticks "$spid"); r0=$(ticks $RPID)
  out=$( { /usr/bin/time -f 'WRKCPU %U %S' wrk -t1 -c"$CONC" -d"$DUR" "$@"; } 2>&1 )
  s1=$(ticks "$spid"); r1=$(ticks $RPID)
  python3 - "$out" $((s1 - s0)) $((r1 - r0)) "$HZ" <<'PY'
import re, sys
out, s, r, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
dur = float(re.search(r"requests in ([\d.]+)s", out).group(1))
u, sy = map(float, re.search(r"WRKCPU ([\d.]+) ([\d.]+)", out).groups())
n = rps * dur
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
errs = re.search(r"Socket errors: (.*)", out)
if bad or errs:
    print(f"bench-baseline: failed requests: {bad.group(0) if bad else ''} {errs.group(0) if errs else ''}", file=sys.stderr)
    sys.exit(1)
print(f"{rps:.0f} {s / hz * 1e6 / n:.1f} {r / hz * 1e6 / n:.1f} {(u + sy) * 1e6 / n:.1f}")
PY
}
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; wrk -t1 -c$CONC -d$DUR, $IDS ids round-robin; $(uptime)"
say "columns: requests/s (CPU µs per request: server / redis / wrk)"
for r in $(seq "$ROUNDS"); do
  eh=$(run $EPID http://127.0.0.1:$EP/healthz) || exit 1
  es=$(run $EPID -s "$OUT/ids.lua" -H "Authorization: Bearer $KEY" http://127.0.0.1:$EP/) || exit 1
  bh=$(run $BPID http://127.0.0.1:$BP/healthz) || exit 1
  bs=$(run $BPID -s "$OUT/ids.lua" http://127.0.0.1:$BP/) || exit 1
  oh="0 0 0 0"; os="0 0 0 0"
  if [ -n "$BEFORE" ]; then
    oh=$(run $OPID http://127.0.0.1:$OP/healthz)
    os=$(run $OPID -s "$OUT/ids.lua" -H "Authorization: Bearer $KEY" http://127.0.0.1:$OP/)
  fi
  python3 - "$r" "$eh" "$es" "$bh" "$bs" "$oh" "$os" <<'PY' | tee -a "$SUMMARY"
import sys
r = sys.argv[1]
eh, es, bh, bs, oh, os_ = [list(map(float, a.split())) for a in sys.argv[2:]]
f = lambda x: f"{x[0]:7.0f} ({x[1]:4.1f}/{x[2]:4.1f}/{x[3]:4.1f})"
line = (f"round {r}: elicitd healthz {f(eh)} status {f(es)} | baseline healthz {f(bh)} status {f(bs)}"
        f" | status/healthz {es[0]/eh[0]:4.2f}  elicitd/baseline status {es[0]/bs[0]:4.2f}  healthz {eh[0]/bh[0]:4.2f}")
if oh[0]:
    line += (f"\n         before: healthz {f(oh)} status {f(os_)} | status/healthz {os_[0]/oh[0]:4.2f}"
             f"  before/baseline status {os_[0]/bs[0]:4.2f}  after/before status {es[0]/os_[0]:4.2f}")
print(line)
PY
done
