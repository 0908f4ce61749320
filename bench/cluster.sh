#!/usr/bin/env bash
# The cluster's measurements (docs/performance/serving.md, "Replicas behind nginx"), one after the other on
# loopback: streaming throughput with ../shared/tools/serve-load/loadgen.py against one replica
# directly, then through nginx to 1 replica (2 threads) and to 2 replicas (1 thread each); the
# response cache's miss, memory-hit and Redis-hit latencies (bench/cache_latency.py); and the fault
# test (tests/e2e/cluster_fault.py). Writes JSON files and summary.md to OUT.
#
#   bench/cluster.sh MODEL.gguf OUT [CLIENTS...]     (default clients: 4 16)
set -euo pipefail
MODEL=${1:?usage: bench/cluster.sh MODEL.gguf OUT [CLIENTS...]}
OUT=${2:?usage: bench/cluster.sh MODEL.gguf OUT [CLIENTS...]}
shift 2
CLIENTS=("${@:-4 16}")
read -r -a CLIENTS <<< "${CLIENTS[*]}"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOADGEN=${LOADGEN:-$ROOT/../shared/tools/serve-load/loadgen.py}
PORT=${PORT:-18500}
DIR="$OUT/cluster"
mkdir -p "$OUT"
CL() { "$ROOT/scripts/cluster.sh" "$1" --dir "$DIR" "${@:2}"; }
trap 'CL stop > /dev/null 2>&1 || true' EXIT

load() {  # name port clients
  local r=$(( 96 / $3 > 1 ? 96 / $3 : 1 ))
  python3 "$LOADGEN" --port "$2" --model model -c "$3" -r "$r" --max-tokens 64 --warmup 1 \
    --tag "$1" -o "$OUT/$1.json" | tail -1
}

for n in 1 2; do
  CL start -m "$MODEL" -n "$n" -t $((2 / n)) --port "$PORT" --no-prometheus -- --alias model \
    --max-seqs 32 -c 512 > /dev/null
  for c in "${CLIENTS[@]}"; do
    [ "$n" = 1 ] && load "direct-1x2t-c$c" $((PORT + 1)) "$c"
    load "nginx-${n}x$((2 / n))t-c$c" "$PORT" "$c"
  done
  if [ "$n" = 2 ]; then
    python3 "$ROOT/bench/cache_latency.py" --port "$PORT" > "$OUT/cache_latency.json"
    cat "$OUT/cache_latency.json"
  fi
  CL stop > /dev/null
  PORT=$((PORT + 10))
done
python3 "$ROOT/tests/e2e/cluster_fault.py" --nexus "${NEXUS:-$ROOT/build/nexus}" \
  --out "$OUT/fault.json" | tail -1

python3 - "$OUT" "${CLIENTS[@]}" <<'EOF'
import json, sys, os
out, clients = sys.argv[1], sys.argv[2:]
rows = ["| setup | clients | tok/s | req/s | TTFT p50 ms | e2e p50 ms | failed |", "|---|---|---|---|---|---|---|"]
for name in ("direct-1x2t", "nginx-1x2t", "nginx-2x1t"):
    for c in clients:
        p = os.path.join(out, f"{name}-c{c}.json")
        if not os.path.exists(p):
            continue
        s = json.load(open(p))["summary"]
        def pct(k):
            v = s.get(k) or {}
            return v.get("p50", "") if isinstance(v, dict) else v
        rows.append(f"| {name} | {c} | {s.get('gen_tok_per_s')} | {s.get('req_per_s')} | "
                    f"{pct('ttft_ms')} | {pct('e2e_ms')} | {s.get('failed', 0)} |")
cache = json.load(open(os.path.join(out, "cache_latency.json")))
fault = json.load(open(os.path.join(out, "fault.json")))
text = "\n".join(rows) + "\n\ncache latency:\n```\n" + json.dumps(cache, indent=1) + \
       "\n```\n\nfault test:\n```\n" + json.dumps(fault, indent=1) + "\n```\n"
open(os.path.join(out, "summary.md"), "w").write(text)
print(text)
EOF
