#!/usr/bin/env bash
# Quick benchmark behind docs/benchmarks.md: Redis + two release replicas (A, B) on fixed
# loopback ports, then healthz, status, redis-benchmark HMGET/TIME, create, await (3000 parked
# on A, decided via B, RSS + Redis connections sampled), mixed. JSON reports in /tmp/bench-out.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release --locked -p elicitd -p elicitd-loadtest >&2
ulimit -n 65536
BIN=target/release
OUT=/tmp/bench-out; rm -rf $OUT; mkdir -p $OUT
RP=36379; AP=38081; BP=38082; KEY=bench-key-0123456789abcdef
redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --maxclients 50000 --dir $OUT --daemonize no > $OUT/redis.log 2>&1 &
RPID=$!
sleep 0.5
start() { ELICITD_LISTEN=127.0.0.1:$1 ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" ELICITD_SECRET=bench-secret-bench-secret-bench-secret \
  ELICITD_CREATE_RATE_PER_SEC=0 ELICITD_MAX_PARKED_AWAITS=20000 ELICITD_LOG_FORMAT=json RUST_LOG=warn $BIN/elicitd > $OUT/replica-$1.log 2>&1 & echo $!; }
APID=$(start $AP); BPID=$(start $BP)
trap 'kill $APID $BPID $RPID 2>/dev/null' EXIT
for p in $AP $BP; do for _ in $(seq 100); do curl -sf http://127.0.0.1:$p/readyz >/dev/null && break; sleep 0.1; done; done
LT="$BIN/elicitd-loadtest"
A=http://127.0.0.1:$AP; B=http://127.0.0.1:$BP
rss() { awk '/VmRSS/{print $2}' /proc/$1/status; }
clients() { redis-cli -p $RP info clients | awk -F: '/connected_clients/{print $2}' | tr -d '\r'; }
echo "load: $(uptime)"
$LT healthz --url $A --api-key $KEY --concurrency 32 --duration 8s --json --quiet > $OUT/healthz.json
$LT status --url $A --api-key $KEY --concurrency 32 --duration 8s --json --quiet > $OUT/status.json
redis-cli -p $RP hset benchkey tenant t status pending kind approval created_ms 1 expires_ms 2 decided_ms 3 >/dev/null
redis-benchmark -p $RP -c 32 -n 300000 -q 2>/dev/null hmget benchkey tenant status kind created_ms expires_ms decided_ms > $OUT/rb-hmget.txt 2>&1
redis-benchmark -p $RP -c 32 -n 300000 -q 2>/dev/null time > $OUT/rb-time.txt 2>&1
$LT create --url $A --api-key $KEY --concurrency 32 --duration 8s --json --quiet > $OUT/create.json
echo "rss_idle_kb=$(rss $APID) clients_idle=$(clients)" > $OUT/rss.txt
$LT await --url $A --api-key $KEY --concurrency 32 --duration 8s --json --quiet --waiters 3000 --hold 10s --decide-url $B > $OUT/await.json &
LPID=$!
sleep 9
echo "rss_parked_kb=$(rss $APID) clients_parked=$(clients) parked=$(curl -s $A/metrics | awk '/^elicitd_awaits_parked /{print $2}')" >> $OUT/rss.txt
wait $LPID
$LT mixed --url $A --api-key $KEY --concurrency 32 --duration 8s --json --quiet --decide-url $B > $OUT/mixed.json
echo "load: $(uptime)"
for f in healthz status create await mixed; do echo "$f: $(cat $OUT/$f.json | head -c 600)"; done
cat $OUT/rb-hmget.txt $OUT/rb-time.txt $OUT/rss.txt
