#!/usr/bin/env bash
# Training throughput of the memory models against the plain llama: L15M's shape (288 wide,
# 6 layers, 32000-token vocab) on tinyshakespeare, `--seq 256 --batch 8 -t 2`, nexus-ltm with
# segments of 64 and each memory of MEMORIES (infini, titans: the linear Titans memory, deep: the
# two-layer MLP memory with 2 x head_dim hidden units). STEPS steps a run, ROUNDS rounds with the
# models alternating (the machine is shared: compare within a round). Prints the tokens/s
# `nexus train` reports at its last step.
# Usage: bench/ltm_train.sh [WORKDIR]   (STEPS=6 ROUNDS=2 MEMORIES="infini titans deep")
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-ltm-train}
SHARED=${SHARED:-../shared}
STEPS=${STEPS:-6}
ROUNDS=${ROUNDS:-2}
MEMORIES=${MEMORIES:-"infini titans deep"}
DATA=$SHARED/data/tinyshakespeare.txt
TOK=$SHARED/vocab/ggml-vocab-llama-spm.gguf
[ -f "$DATA" ] || { echo "ltm_train: $DATA not found" >&2; exit 1; }
mkdir -p "$W"
common="--shape 288,6,6,6,768,32000 --tokenizer $TOK --data $DATA --seq 256 --batch 8 -t 2
  --steps $STEPS -o $W/out.gguf"
printf '%-6s %-8s %10s\n' round model "tokens/s"
for r in $(seq "$ROUNDS"); do
  for m in llama $MEMORIES; do
    case $m in
      llama) flags="" ;;
      infini) flags="--arch nexus-ltm --memory-segment 64 --memory-kind infini" ;;
      titans) flags="--arch nexus-ltm --memory-segment 64 --memory-kind titans" ;;
      deep) flags="--arch nexus-ltm --memory-segment 64 --memory-kind titans --memory-depth 2" ;;
      *) echo "ltm_train: unknown memory '$m' (infini, titans, deep)" >&2; exit 1 ;;
    esac
    # shellcheck disable=SC2086
    tps=$("$NEXUS" train $common $flags 2>&1 | grep -o '[0-9]* tok/s' | tail -1 | awk '{print $1}')
    printf '%-6s %-8s %10s\n' "$r" "$m" "$tps"
  done
done
