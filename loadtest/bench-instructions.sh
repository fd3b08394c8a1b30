#!/usr/bin/env bash
# Instructions per request — the replica's and Redis's user-space work, counted by valgrind's
# callgrind — for create (the load tool; replica and Redis) and for status (1000 ids) and
# /healthz (wrk -t1, as in bench-baseline.sh; the replica). Unlike time, an
# instruction count does not drift with the machine (other tenants, CPU frequency), so it is the
# steady before/after figure of a change to either process; kernel work (sockets, wake-ups) is
# not in it. Each (process, scenario) pair is one run: one process under callgrind, the other
# native, a warm-up, then the counted phase (DUR, default 6s, at C connections, default 32).
# BIN=<dir> measures another build (default: this workspace's release build); BEFORE=<dir>
# measures an older build too, in the same invocation. Needs valgrind (apt-get install valgrind).
# Reports under $OUT (default /tmp/bench-instructions); the table in $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v valgrind >/dev/null || { echo "bench-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench-instructions: needs wrk (apt-get install wrk)" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2 || exit 1
fi
source .ci/lib.sh
source loadtest/bench-lib.sh
BIN=${BIN:-"$(target_dir)/release"}
# The load tool of BIN drives every build, so both see the same client.
LT="$BIN/elicitd-loadtest"
OUT=${OUT:-/tmp/bench-instructions}; rm -rf "$OUT"; mkdir -p "$OUT"
DUR=${DUR:-6s}; C=${C:-32}; KEY=bench-key-0123456789abcdef
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"

# one <build dir> <label> <who: replica|redis> <scenario>: prints instructions per request.
one() {
  local bin=$1 label=$2 who=$3 sc=$4 dir="$OUT/$2-$3-$4" rp ap rpid apid vg n total
  mkdir -p "$dir"
  rp=$(free_port); ap=$(free_port)
  vg=(valgrind --tool=callgrind "--callgrind-out-file=$dir/cg.out" --instr-atstart=no)
  local rv=() av=()
  if [ "$who" = redis ]; then rv=("${vg[@]}"); else av=("${vg[@]}"); fi
  "${rv[@]}" redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --daemonize no > "$dir/redis.log" 2>&1 &
  rpid=$!
  for _ in $(seq 150); do redis-cli -p "$rp" ping >/dev/null 2>&1 && break; sleep 0.2; done
  ELICITD_LISTEN=127.0.0.1:$ap ELICITD_REDIS_URL=redis://127.0.0.1:$rp ELICITD_API_KEYS="bench:$KEY" \
    ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
    ELICITD_LOG_FORMAT=json RUST_LOG=warn "${av[@]}" "$bin/elicitd" > "$dir/replica.log" 2>&1 &
  apid=$!
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$ap/readyz" >/dev/null && break; sleep 0.2; done
  local p=$apid; [ "$who" = redis ] && p=$rpid
  if [ "$sc" = create ]; then
    "$LT" create --url "http://127.0.0.1:$ap" --api-key $KEY --concurrency 8 --duration 2s --quiet \
      > /dev/null 2>&1
    callgrind_control -i on "$p" > /dev/null
    "$LT" create --url "http://127.0.0.1:$ap" --api-key $KEY --concurrency "$C" --duration "$DUR" \
      --json --quiet > "$dir/load.json" 2>&1
  else
    # Seeded before counting (1000 pending approvals), then wrk polls them round-robin, as
    # bench-baseline.sh does.
    seed_ids "$ap" "$KEY" 1000 > "$dir/ids.txt"
    ids_lua "$dir/ids.txt" > "$dir/ids.lua"
    local target=(-s "$dir/ids.lua" -H "Authorization: Bearer $KEY" "http://127.0.0.1:$ap/")
    [ "$sc" = healthz ] && target=("http://127.0.0.1:$ap/healthz")
    wrk -t1 -c"$C" -d2s "${target[@]}" > /dev/null 2>&1
    callgrind_control -i on "$p" > /dev/null
    wrk -t1 -c"$C" -d"$DUR" "${target[@]}" > "$dir/wrk.txt" 2>&1
  fi
  callgrind_control -i off "$p" > /dev/null
  callgrind_control -d "$p" > /dev/null
  sleep 1
  kill $apid $rpid 2>/dev/null; wait $apid $rpid 2>/dev/null
  if [ "$sc" = create ]; then
    n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['requests'])" "$dir/load.json")
  else
    n=$(awk '/requests in/ {print $1}' "$dir/wrk.txt")
    grep -q "Non-2xx" "$dir/wrk.txt" && { echo "bench-instructions: failed polls ($dir)" >&2; exit 1; }
  fi
  total=$(callgrind_annotate "$dir"/cg.out.* 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo $(( total / n ))
}

say() { echo "$*" | tee -a "$SUMMARY"; }
say "instructions per request (callgrind; $C connections, $DUR; status polls 1000 ids)"
BUILDS=("$BIN after"); [ -n "${BEFORE:-}" ] && BUILDS=("$BEFORE before" "${BUILDS[@]}")
for sc in create status healthz; do
  for who in replica redis; do
    # Not Redis per status poll: under valgrind Redis is ~50x slower, the replica's read
    # batches grow to match, and the count per poll measures the batch size more than the
    # work (bench-targets.sh's redis-cpu, native, is that figure).
    [ "$sc" != create ] && [ "$who" = redis ] && continue
    line=$(printf '%-8s %-8s' "$sc" "$who")
    for b in "${BUILDS[@]}"; do
      set -- $b
      line+=$(printf '  %s %8s' "$2" "$(one "$1" "$2" "$who" "$sc")")
    done
    say "$line"
  done
done
