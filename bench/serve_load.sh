#!/usr/bin/env bash
# Side-by-side serving benchmark: nexus serve and llama-server on the same model, one after the
# other, driven by ../shared/tools/serve-load/loadgen.py (closed-loop streaming clients on
# loopback): ~100-token prompts and 64 generated tokens at 1, 4, 16 and 32 clients, then a
# shared 400-token prefix with nexus's prefix cache on and off (and, for a recurrent model, with
# its state snapshots off). Writes one JSON per run and a
# summary table (summary.md) to OUT.
#
#   LLAMA_SERVER=/path/to/llama-server bench/serve_load.sh MODEL.gguf OUT [REQUESTS_PER_CLIENT...]
#
# REQUESTS_PER_CLIENT gives each concurrency's requests per client (default "4 2 1 1" for 1, 4,
# 16, 32 clients); SHARED_REQS the shared-prefix runs' requests per client (default 2: the first
# round finds nothing cached, so 8 shows the steady state); SHARED_ONLY=1 runs only those.
# llama-server runs as `-t 2 -cb -np N -c N*512` (a slot per client); nexus as
# `-t 2 --max-seqs 32 -c 512`. Without LLAMA_SERVER only nexus runs.
set -euo pipefail
MODEL=${1:?usage: serve_load.sh MODEL.gguf OUT [REQUESTS_PER_CLIENT...]}
OUT=${2:?usage: serve_load.sh MODEL.gguf OUT [REQUESTS_PER_CLIENT...]}
shift 2
REQS=("${@:-4 2 1 1}")
read -r -a REQS <<< "${REQS[*]}"
CONC=(1 4 16 32)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NEXUS=${NEXUS:-$ROOT/build/nexus}
LOADGEN=${LOADGEN:-$ROOT/../shared/tools/serve-load/loadgen.py}
PORT=${PORT:-18090}
mkdir -p "$OUT"

wait_ready() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "serve_load: server on port $PORT did not become ready" >&2
  return 1
}

stop() {  # pid: SIGTERM, then wait until it has exited and the port is free
  kill "$1" 2> /dev/null || true
  while kill -0 "$1" 2> /dev/null; do sleep 0.1; done
  while curl -s "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; do sleep 0.1; done
}

rss_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2> /dev/null || echo 0; }

run_load() {  # name conc reqs extra-args...
  local name=$1 c=$2 r=$3
  shift 3
  python3 "$LOADGEN" --port "$PORT" --model model -c "$c" -r "$r" --max-tokens 64 \
    --warmup 1 --tag "$name" -o "$OUT/$name.json" "$@" | tail -1
}

nexus_server() {  # extra args...; sets pid
  PORT=$((PORT + 1))  # a fresh port per server: the last one's may still be held by the kernel
  "$NEXUS" serve -m "$MODEL" --alias model --port "$PORT" -t 2 --max-seqs 32 -c 512 "$@" \
    > "$OUT/nexus-serve.log" 2>&1 &
  pid=$!
}

# nexus: unique prompts at each concurrency, then the shared prefix with and without its cache.
SHARED_REQS=${SHARED_REQS:-2}
for i in "${!CONC[@]}"; do
  [ "${SHARED_ONLY:-0}" = 1 ] && break
  c=${CONC[$i]}
  nexus_server
  wait_ready
  run_load "nexus-c$c" "$c" "${REQS[$i]}" --mode unique --prompt-tokens 100
  echo "nexus-c$c rss_kb $(rss_kb "$pid")" >> "$OUT/rss.txt"
  stop "$pid"
done
for cache in 8 0; do
  nexus_server --prefix-cache $cache
  wait_ready
  run_load "nexus-shared-cache$cache" 4 "$SHARED_REQS" --mode shared --prefix-tokens 400 --suffix-tokens 50
  stop "$pid"
done
# A recurrent model (mamba, mamba2, granitehybrid) shares a partial prefix through its state
# snapshots: the same run with them off (whole states only).
if "$NEXUS" info "$MODEL" 2> /dev/null | grep -qE '^architecture: +(mamba|mamba2|granitehybrid)$'; then
  nexus_server --prefix-cache 8 --state-snapshots 0
  wait_ready
  run_load "nexus-shared-cache8-nosnap" 4 "$SHARED_REQS" --mode shared --prefix-tokens 400 --suffix-tokens 50
  stop "$pid"
fi

if [ -n "${LLAMA_SERVER:-}" ]; then
  for i in "${!CONC[@]}"; do
    [ "${SHARED_ONLY:-0}" = 1 ] && break
    c=${CONC[$i]}
    PORT=$((PORT + 1))
    "$LLAMA_SERVER" -m "$MODEL" --port "$PORT" -t 2 -cb -np "$c" -c $((c * 512)) \
      > "$OUT/llama-server.log" 2>&1 &
    pid=$!
    wait_ready
    run_load "llama-c$c" "$c" "${REQS[$i]}" --mode unique --prompt-tokens 100
    echo "llama-c$c rss_kb $(rss_kb "$pid")" >> "$OUT/rss.txt"
    stop "$pid"
  done
  PORT=$((PORT + 1))
  "$LLAMA_SERVER" -m "$MODEL" --port "$PORT" -t 2 -cb -np 4 -c 2048 > "$OUT/llama-server.log" 2>&1 &
  pid=$!
  wait_ready
  run_load "llama-shared" 4 "$SHARED_REQS" --mode shared --prefix-tokens 400 --suffix-tokens 50
  stop "$pid"
fi

python3 - "$OUT" << 'PY'
import json, os, sys
out = sys.argv[1]
rows = []
for name in sorted(os.listdir(out)):
    if not name.endswith(".json"):
        continue
    s = json.load(open(os.path.join(out, name)))
    s = s.get("summary", s)
    def g(*keys):
        v = s
        for k in keys:
            v = v.get(k) if isinstance(v, dict) else None
        return v
    rows.append((name[:-5], g("completed"), g("failed"), g("gen_tok_per_s"), g("req_per_s"),
                 g("ttft_ms", "p50"), g("ttft_ms", "p99"), g("itl_ms", "p50"), g("itl_ms", "p99")))
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("| run | ok | fail | gen tok/s | req/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |\n")
    f.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        f.write("| " + " | ".join("" if v is None else str(v) for v in r) + " |\n")
print(open(os.path.join(out, "summary.md")).read())
PY
