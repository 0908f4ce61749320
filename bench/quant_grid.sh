#!/usr/bin/env bash
# Quantization side by side with llama.cpp: every type quantized by nexus and by llama-quantize,
# each without an imatrix and with each tool's imatrix (they read each other's files), and the
# perplexity of every file by `nexus perplexity` (docs/COMPRESSION.md, "Importance matrices").
#
# usage: bench/quant_grid.sh MODEL.gguf CALIB.txt EVAL.txt [OUTDIR]
# env: NEXUS_BIN (default build/nexus), LLAMA_BIN (a folder with llama-quantize and
#      llama-imatrix, built outside this repository; required), TYPES, CTX (default 128)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 3 ]] || { echo "usage: $0 MODEL.gguf CALIB.txt EVAL.txt [OUTDIR]" >&2; exit 2; }
model="$1" calib="$2" eval_text="$3" out="${4:-$here/../build/quant-grid}"
nexus="${NEXUS_BIN:-$here/../build/nexus}"
llama="${LLAMA_BIN:?set LLAMA_BIN to a folder holding llama-quantize and llama-imatrix}"
types="${TYPES:-Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K Q4_0 Q8_0}"
ctx="${CTX:-128}"
for f in "$model" "$calib" "$eval_text"; do
  [[ -f "$f" ]] || { echo "quant_grid.sh: error: '$f' not found" >&2; exit 1; }
done
for b in llama-quantize llama-imatrix; do
  [[ -x "$llama/$b" ]] || { echo "quant_grid.sh: error: no $b in '$llama'" >&2; exit 1; }
done
mkdir -p "$out"

"$nexus" imatrix -m "$model" -f "$calib" -c "$ctx" -o "$out/nexus-imatrix.gguf" > "$out/nexus-imatrix.log" 2>&1
"$llama/llama-imatrix" -m "$model" -f "$calib" -c "$ctx" -o "$out/llama-imatrix.gguf" -t 2 \
  > "$out/llama-imatrix.log" 2>&1
ppl() { "$nexus" perplexity -m "$1" -f "$eval_text" -c "$ctx" -t 2 2>&1 | grep -o 'PPL = [0-9.]*' | cut -d' ' -f3; }
cell() { [[ -f "$1" ]] && echo "$(ppl "$1") ($(stat -c %s "$1") B)" || echo "failed"; }

echo "| type | nexus, none | nexus, nexus imatrix | nexus, llama's | llama-quantize, none | llama-quantize, llama's | llama-quantize, nexus's |"
echo "|---|---|---|---|---|---|---|"
echo "| F32 | $(cell "$model") | | | | | |"
for t in $types; do
  "$nexus" quantize -q "$model" "$out/n-$t.gguf" "$t" > /dev/null 2>&1 || true
  "$nexus" quantize -q "$model" "$out/n-$t-ni.gguf" "$t" --imatrix "$out/nexus-imatrix.gguf" > /dev/null 2>&1 || true
  "$nexus" quantize -q "$model" "$out/n-$t-li.gguf" "$t" --imatrix "$out/llama-imatrix.gguf" > /dev/null 2>&1 || true
  "$llama/llama-quantize" "$model" "$out/l-$t.gguf" "$t" > /dev/null 2>&1 || true
  "$llama/llama-quantize" --imatrix "$out/llama-imatrix.gguf" "$model" "$out/l-$t-li.gguf" "$t" > /dev/null 2>&1 || true
  "$llama/llama-quantize" --imatrix "$out/nexus-imatrix.gguf" "$model" "$out/l-$t-ni.gguf" "$t" > /dev/null 2>&1 || true
  row="| $t"
  for f in n-$t n-$t-ni n-$t-li l-$t l-$t-li l-$t-ni; do row="$row | $(cell "$out/$f.gguf")"; done
  echo "$row |"
done
