#!/usr/bin/env bash
# Builds a speculative-decoding model pair with nexus alone and measures it:
#   1. a target (llama 6 x 384, 11.9 M) trained on tinyshakespeare with the demo model's tokenizer;
#   2. the draft: the demo model (0.98 M) fine-tuned on the target's own greedy continuations
#      (sequence-level distillation, bench/spec_distill.py through `nexus serve`);
#   3. `nexus run` greedy with and without --draft, RUNS times each, printing tokens/s and
#      checking that the text is identical.
# Usage: bench/spec_pair.sh [WORKDIR]   (about 10 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-specpair}
SHARED=${SHARED:-../shared}
RUNS=${RUNS:-9}
TARGET_STEPS=${TARGET_STEPS:-700}
DRAFT_STEPS=${DRAFT_STEPS:-400}
PORT=${PORT:-18093}
mkdir -p "$W"
[ -f "$SHARED/data/tinyshakespeare.txt" ] || { echo "spec_pair: $SHARED/data/tinyshakespeare.txt not found" >&2; exit 1; }

if [ ! -f "$W/target.gguf" ]; then
  "$NEXUS" tokenize-data -i "$SHARED/data/tinyshakespeare.txt" -m models/shakespeare-1m.gguf \
    -o "$W/ts.bin" --val-fraction 0.1
  "$NEXUS" train --shape 384,6,6,6,1152 --tokenizer models/shakespeare-1m.gguf --data "$W/ts.bin" \
    --batch 8 --seq 128 --steps "$TARGET_STEPS" --lr 2e-3 --min-lr 2e-4 --warmup 50 \
    -o "$W/target.gguf" > "$W/target.log" 2>&1
fi

if [ ! -f "$W/draft.gguf" ]; then
  "$NEXUS" serve -m "$W/target.gguf" --port "$PORT" --max-seqs 16 > "$W/serve.log" 2>&1 &
  SERVE=$!
  trap 'kill $SERVE 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
  python3 bench/spec_distill.py --url "http://127.0.0.1:$PORT" --corpus "$SHARED/data/tinyshakespeare.txt" \
    --out "$W/distill.txt"
  kill -TERM $SERVE; wait $SERVE || true; trap - EXIT
  "$NEXUS" tokenize-data -i "$W/distill.txt" -m models/shakespeare-1m.gguf -o "$W/distill.bin" \
    --val-fraction 0.05
  "$NEXUS" train --init models/shakespeare-1m.gguf --data "$W/distill.bin" --batch 16 --seq 128 \
    --steps "$DRAFT_STEPS" --lr 1e-3 --min-lr 1e-4 --warmup 20 -o "$W/draft.gguf" > "$W/draft.log" 2>&1
fi

: > "$W/rates.txt"
run() {  # $1: label, rest: extra flags
  local label=$1; shift
  "$NEXUS" run -m "$W/target.gguf" -p "ROMEO:" -n 256 --temp 0 -t 2 "$@" > "$W/out_$label.txt" 2> "$W/err_$label.txt"
  printf '%-10s %s | %s\n' "$label" "$(grep -o 'generated: [0-9]* tokens, [0-9.]* tokens/s' "$W/err_$label.txt")" \
    "$(grep -o 'speculation: .*' "$W/err_$label.txt" || true)"
  echo "$label $(grep -o '[0-9.]* tokens/s' "$W/err_$label.txt" | tail -1 | cut -d' ' -f1)" >> "$W/rates.txt"
}
for r in $(seq "$RUNS"); do
  run plain
  for k in 2 4 6; do
    run "draft$k" --draft "$W/draft.gguf" --draft-max "$k"
    cmp -s "$W/out_plain.txt" "$W/out_draft$k.txt" || { echo "spec_pair: output differs with --draft-max $k" >&2; exit 1; }
  done
done
# Medians over the runs, and each one's ratio to plain decoding.
python3 - "$W/rates.txt" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    label, rate = line.split()
    rates.setdefault(label, []).append(float(rate))
base = statistics.median(rates["plain"])
for label, r in rates.items():
    m = statistics.median(r)
    print(f"median {label:8s} {m:8.1f} tokens/s  {m / base:5.2f}x  ({len(r)} runs)")
PY
