#!/usr/bin/env bash
# Webhook cost and delivery latency (docs/benchmarks.md, "Webhooks"): one Redis, two release
# replicas with webhooks enabled (A creates, B decides; both deliver), then ROUNDS rounds of
#   webhooks --no-webhook   COUNT approvals created and decided, no webhookUrl (the baseline)
#   webhooks                the same with webhookUrl on the load tool's own receiver
# Reports (JSON per run, summary.txt) go to $OUT (default /tmp/bench-webhooks).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd -p elicitd-loadtest >&2
fi
source .ci/lib.sh
BIN=${BIN:-"$(target_dir)/release"}
OUT=${OUT:-/tmp/bench-webhooks}; rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}; COUNT=${COUNT:-1000}; CONC=${CONC:-32}
RP=$(free_port); AP=$(free_port); BP=$(free_port); KEY=bench-key-0123456789abcdef
SECRET=whsec_$(head -c 32 /dev/urandom | base64 -w0)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" --daemonize no > "$OUT/redis.log" 2>&1 &
RPID=$!
for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.05; done
start() { ELICITD_LISTEN=127.0.0.1:$1 ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" \
  ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
  ELICITD_WEBHOOK_SECRETS="bench:$SECRET" ELICITD_WEBHOOK_ALLOW_PRIVATE=true \
  ELICITD_LOG_FORMAT=json RUST_LOG=warn "$BIN/elicitd" > "$OUT/replica-$1.log" 2>&1 & echo $!; }
APID=$(start "$AP"); BPID=$(start "$BP")
trap 'kill $APID $BPID $RPID 2>/dev/null; wait $APID $BPID $RPID 2>/dev/null' EXIT
for p in $AP $BP; do for _ in $(seq 100); do curl -sf "http://127.0.0.1:$p/readyz" >/dev/null && break; sleep 0.1; done; done
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; $(uptime)"
for i in $(seq "$ROUNDS"); do
  for mode in off on; do
    flag=(); [ $mode = off ] && flag=(--no-webhook)
    "$BIN/elicitd-loadtest" webhooks --url "http://127.0.0.1:$AP" --decide-url "http://127.0.0.1:$BP" \
      --api-key $KEY --concurrency "$CONC" --count "$COUNT" --json --quiet "${flag[@]}" > "$OUT/$mode-$i.json"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY' | tee -a "$SUMMARY"
import json, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
for mode in ("off", "on"):
    runs = [json.load(open(f"{out}/{mode}-{i}.json")) for i in range(1, rounds + 1)]
    c = st.median(r["extra"]["create_per_s"] for r in runs)
    d = st.median(r["extra"]["decide_per_s"] for r in runs)
    errs = sum(r["errors"] for r in runs)
    line = f"webhooks {mode:3}: create {c:7.0f}/s  decide {d:7.0f}/s  errors {errs}"
    if mode == "on":
        p50 = st.median(r["ops"]["delivery"]["p50_ms"] for r in runs)
        p99 = st.median(r["ops"]["delivery"]["p99_ms"] for r in runs)
        mx = max(r["ops"]["delivery"]["max_ms"] for r in runs)
        got = [r["ops"]["delivery"]["requests"] for r in runs]
        line += f"  delivery (arrived − decision sent) p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {mx:.1f} ms  delivered {got}"
    print(line)
PY
say "deliveries per replica: A $(curl -s "http://127.0.0.1:$AP/metrics" | grep -E '^elicitd_webhook_deliveries_total' | tr '\n' ' ')"
say "                        B $(curl -s "http://127.0.0.1:$BP/metrics" | grep -E '^elicitd_webhook_deliveries_total' | tr '\n' ' ')"
say "load at the end: $(uptime)"
