#!/usr/bin/env bash
# A small granitehybrid against a llama of the same parameter count and token budget (the demo
# model's recipe, docs/TRAINING.md) on
# tinyshakespeare (the demo model's tokenizer): validation loss, tokens/s and memory from each
# run's metrics, then each model's perplexity on the validation split.
# Usage: bench/hybrid_train.sh [WORKDIR]   (about 5 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-hybrid}
SHARED=${SHARED:-../shared}
STEPS=${STEPS:-1000}
mkdir -p "$W"
[ -f "$SHARED/data/tinyshakespeare.txt" ] || { echo "hybrid_train: $SHARED/data/tinyshakespeare.txt not found" >&2; exit 1; }
[ -f "$W/ts.bin" ] || "$NEXUS" tokenize-data -i "$SHARED/data/tinyshakespeare.txt" \
  -m models/shakespeare-1m.gguf -o "$W/ts.bin" --val-fraction 0.1 > /dev/null
common=(--tokenizer models/shakespeare-1m.gguf --data "$W/ts.bin" --batch 16 --seq 128
        --steps "$STEPS" --lr 3e-3 --min-lr 3e-4 --warmup 50 --eval-interval 100 -t 2 --seed 1)
# ~0.98 M parameters each: llama 4 x 128 (ffn 384); granitehybrid 4 x 128, layer 3 attention,
# layers 0-2 Mamba-2 (inner 256, 4 heads of 64, state 64), every layer with an FFN of 288.
for spec in "llama 128,4,4,4,384" "granitehybrid 128,4,4,4,288"; do
  set -- $spec
  "$NEXUS" train --arch "$1" --shape "$2" "${common[@]}" --metrics "$W/$1.jsonl" \
    -o "$W/$1.gguf" > "$W/$1.log" 2>&1
  head -1 "$W/$1.log"
  tail -2 "$W/$1.log" | head -1
  grep -o 'peak RSS.*' "$W/$1.log" | tail -1 || true
done
# The text of the validation split: the last tenth, from a line start.
python3 -c "import sys; t = open(sys.argv[1]).read(); c = t.index('\n', len(t) * 9 // 10) + 1; open(sys.argv[2], 'w').write(t[c:])" \
  "$SHARED/data/tinyshakespeare.txt" "$W/val.txt"
for m in llama granitehybrid; do
  printf '%-14s ' "$m"
  "$NEXUS" perplexity -m "$W/$m.gguf" -f "$W/val.txt" -c 128 2>&1 | tail -1
done
