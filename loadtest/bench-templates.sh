#!/usr/bin/env bash
# Review page render time with a 500-option templated selection (docs/benchmarks.md,
# "Display templates"): one Redis, one release replica; for each request below, N sequential
# GETs of its review page (curl, one connection each), p50/p90/p99 of the total time, and the
# server's own elicitd_template_render_seconds for the templated pages.
#   plain        500 options, no templates (the default table)
#   templated    500 options, rowTemplate (4 cells, 6 filters) + hoverTemplate + displayTemplate + css
#   bomb         500 options whose row and hover templates never finish (the 100 ms fallback)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p elicitd >&2
fi
source .ci/lib.sh
BIN=${BIN:-"$(target_dir)/release"}
OUT=${OUT:-/tmp/bench-templates}; rm -rf "$OUT"; mkdir -p "$OUT"
N=${N:-200}
RP=$(free_port); AP=$(free_port); KEY=bench-key-0123456789abcdef
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" --daemonize no > "$OUT/redis.log" 2>&1 &
RPID=$!
for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.05; done
ELICITD_LISTEN=127.0.0.1:$AP ELICITD_REDIS_URL=redis://127.0.0.1:$RP ELICITD_API_KEYS="bench:$KEY" \
  ELICITD_SECRET=bench-secret-bench-secret-bench-secret ELICITD_CREATE_RATE_PER_SEC=0 \
  ELICITD_LOG_FORMAT=json RUST_LOG=warn "$BIN/elicitd" > "$OUT/replica.log" 2>&1 &
APID=$!
trap 'kill $APID $RPID 2>/dev/null; wait $APID $RPID 2>/dev/null' EXIT
B=http://127.0.0.1:$AP
for _ in $(seq 100); do curl -sf "$B/readyz" >/dev/null && break; sleep 0.1; done
SUMMARY="$OUT/summary.txt"; : > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "machine: $(nproc) cores; $(uptime)"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
options = [{"id": f"sku-{i}", "label": f"Plan {i}", "price": 9 + i % 40, "cpus": 1 + i % 16,
            "regions": ["fra", "dub", "iad"][: 1 + i % 3], "since": "2024-03-01T10:00:00Z",
            "note": f"Tier {i % 5} plan with <b>{i % 7}</b> extras"} for i in range(500)]
row = ("<td class=\"name\">{{ option.label | upcase }}</td><td>{{ option.price | times: 1.19 | round: 2 }} €</td>"
       "<td>{{ option.cpus }} vCPU</td><td>{{ option.regions | join: \", \" | upcase }} since {{ option.since | date: \"%b %Y\" }}</td>")
hover = ("<h4>{{ option.label }}</h4><p>{{ option.note | truncate: 40 }}</p><ul>{% for r in option.regions %}"
         "<li>{{ r | upcase }}</li>{% endfor %}</ul><p><time>{{ option.since | date: \"%d %b %Y\" }}</time></p>")
display = "<table>{% for k in context.rows %}<tr><th>{{ k.name }}</th><td>{{ k.value }}</td></tr>{% endfor %}</table>"
css = ("td.name { font-weight: 700 } table.options td { padding: 2px 6px } h4 { margin: 0 }"
       " @media (max-width: 500px) { td { font-size: 90% } }")
context = {"rows": [{"name": f"k{i}", "value": i} for i in range(40)]}
base = {"message": "Pick a plan", "options": options, "context": context}
json.dump(base, open(f"{out}/plain.json", "w"))
json.dump(dict(base, rowTemplate=row, hoverTemplate=hover, displayTemplate=display, css=css), open(f"{out}/templated.json", "w"))
bomb = "<td>{% for i in (1..100000000) %}{{ i }}{% endfor %}</td>"
json.dump(dict(base, rowTemplate=bomb, hoverTemplate=bomb[4:-5]), open(f"{out}/bomb.json", "w"))
PY
for name in plain templated bomb; do
  R=$(curl -sf -XPOST "$B/v1/selections" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary @"$OUT/$name.json")
  TOKEN=$(echo "$R" | python3 -c 'import json,sys; print(json.load(sys.stdin)["reviewUrl"].rsplit("/",1)[1])')
  curl -s -o "$OUT/$name.html" "$B/review/$TOKEN"
  for _ in $(seq "$N"); do curl -s -o /dev/null -w '%{time_total}\n' "$B/review/$TOKEN"; done > "$OUT/$name.times"
  python3 - "$OUT/$name.times" "$name" "$(wc -c < "$OUT/$name.html")" <<'PY' | tee -a "$SUMMARY"
import sys
t = sorted(float(x) * 1000 for x in open(sys.argv[1]))
q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
print(f"{sys.argv[2]:10} page {int(sys.argv[3]) // 1024} KiB  GET p50 {q(.5):6.1f} ms  p90 {q(.9):6.1f} ms  p99 {q(.99):6.1f} ms  max {t[-1]:6.1f} ms  (n={len(t)})")
PY
done
say "fallbacks: $(curl -s "$B/metrics" | grep '^elicitd_template_fallbacks_total' | tr '\n' ' ')"
say "render histogram (templated + bomb pages): $(curl -s "$B/metrics" | grep -E '^elicitd_template_render_seconds_(sum|count)' | tr '\n' ' ')"
say "load at the end: $(uptime)"
