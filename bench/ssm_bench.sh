#!/usr/bin/env bash
# State-space models side by side with llama.cpp, and decode speed against context length.
#  1. A mamba2 of mamba2-130m's shape (dim 768, 24 layers, inner 1536, 24 heads, state 128; the
#     demo vocabulary, so 91 M parameters; weights from one training step: speed does not depend
#     on them) in F16, BF16 and Q8_0: llama-bench and nexus bench, pp512 and tg64, 2 threads.
#  2. The demo llama (models/shakespeare-1m.gguf) and the demo hybrid
#     (models/shakespeare-hybrid-1m.gguf, one attention layer in four): tg32 after 1K, 4K, 16K and
#     64K tokens of context, and peak memory.
# Usage: LLAMA_BENCH=path/to/llama-bench bench/ssm_bench.sh [WORKDIR]   (LLAMA_BENCH optional)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-ssm-bench}
SHARED=${SHARED:-../shared}
mkdir -p "$W"
if [ ! -f "$W/m2.gguf" ]; then
  [ -f "$W/ts.bin" ] || "$NEXUS" tokenize-data -i "$SHARED/data/tinyshakespeare.txt" \
    -m models/shakespeare-1m.gguf -o "$W/ts.bin" > /dev/null 2>&1
  "$NEXUS" train --arch mamba2 --shape 768,24,24,1,1536 --ssm-state 128 \
    --tokenizer models/shakespeare-1m.gguf --data "$W/ts.bin" --batch 1 --seq 64 --steps 1 \
    -o "$W/m2.gguf" > /dev/null 2>&1
  "$NEXUS" convert -i "$W/m2.gguf" -o "$W/m2-f16.gguf" --type f16 > /dev/null
  "$NEXUS" convert -i "$W/m2.gguf" -o "$W/m2-q8_0.gguf" --type q8_0 > /dev/null
fi
[ -f "$W/m2-bf16.gguf" ] || "$NEXUS" convert -i "$W/m2.gguf" -o "$W/m2-bf16.gguf" --type bf16 > /dev/null
MODELS="$W/m2-f16.gguf,$W/m2-bf16.gguf,$W/m2-q8_0.gguf"
echo "## mamba2 91M: pp512 / tg64, 2 threads"
if [ -n "${LLAMA_BENCH:-}" ]; then
  "$LLAMA_BENCH" -m "$MODELS" -p 512 -n 64 -t 2 -r 3 2>/dev/null | grep -E "^\| (model|mamba)"
fi
"$NEXUS" bench -m "$MODELS" -p 512 -n 64 -t 2 -r 3 2>/dev/null | grep -E "^\| (model|mamba)"
echo "## decode after d tokens of context: demo llama vs demo hybrid"
for m in models/shakespeare-1m.gguf models/shakespeare-hybrid-1m.gguf; do
  "$NEXUS" bench -m "$m" -p 0 -n 32 -d 1024,4096,16384,65536 -t 2 -r 1 2>/dev/null | grep -E "^\| (model|llama|granite)"
done
