#!/usr/bin/env bash
# The long-term memory's footprint against a KV cache: an L15M-shaped llama and the same shape as
# nexus-ltm (segments of 256 tokens) with each memory of MEMORIES (infini: Infini-attention's;
# titans: Titans' linear memory; deep: Titans' two-layer MLP memory with 2 x head_dim hidden
# units), all trained for 2 steps here only to have the files, read
# a prompt of about 2K, 8K and 32K tokens of tinyshakespeare and generate 16 tokens (`nexus run`
# with a context of 9/8 of it, f16 KV cache, 2 threads). Prints the context, the prompt's tokens,
# the KV cache + memory bytes `nexus run` reports, the peak RSS, and the prompt tokens/s.
# Usage: bench/ltm_memory.sh [WORKDIR]
#   (LENGTHS="2048 8192 32768" MEMORIES="infini titans deep"; about 8 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-ltm-mem}
SHARED=${SHARED:-../shared}
LENGTHS=${LENGTHS:-"2048 8192 32768"}
MEMORIES=${MEMORIES:-"infini titans deep"}
DATA=$SHARED/data/tinyshakespeare.txt
TOK=$SHARED/vocab/ggml-vocab-llama-spm.gguf
[ -f "$DATA" ] || { echo "ltm_memory: $DATA not found" >&2; exit 1; }
mkdir -p "$W"
common="--shape 288,6,6,6,768,32000 --tokenizer $TOK --data $DATA --seq 256 --batch 1 --steps 2 -t 2"
[ -f "$W/llama.gguf" ] || "$NEXUS" train $common -o "$W/llama.gguf" > /dev/null 2>&1
for m in $MEMORIES; do
  case $m in
    infini) flags="--memory-kind infini" ;;
    titans) flags="--memory-kind titans" ;;
    deep) flags="--memory-kind titans --memory-depth 2" ;;
    *) echo "ltm_memory: unknown memory '$m' (infini, titans, deep)" >&2; exit 1 ;;
  esac
  [ -f "$W/$m.gguf" ] || "$NEXUS" train $common --arch nexus-ltm --memory-segment 256 $flags \
    -o "$W/$m.gguf" > /dev/null 2>&1
done
# A prompt of each length: the file's first tokens (nexus tokenize counts them).
printf '%-9s %-8s %14s %12s %22s\n' model context "KV+memory MiB" "peak RSS MiB" "prompt tokens @ tok/s"
for n in $LENGTHS; do
  head -c $((n * 16 / 5)) "$DATA" > "$W/p.txt"  # about 3.2 characters a token
  for m in llama $MEMORIES; do
    ctx=$((n * 9 / 8))
    log=$("$NEXUS" run -m "$W/$m.gguf" -f "$W/p.txt" -c $ctx -n 16 --temp 0 -t 2 2>&1 >/dev/null)
    kv=$(grep -o 'KV cache [0-9.]* MiB' <<< "$log" | awk '{print $3}')
    rss=$(grep -o 'peak RSS [0-9.]* MiB' <<< "$log" | awk '{print $3}')
    tps=$(grep -o 'prompt: [0-9]* tokens, [0-9.]* tokens/s' <<< "$log" | awk '{print $2 " @ " $4}')
    printf '%-9s %-8s %14s %12s %22s\n' "$m" "$ctx" "$kv" "$rss" "$tps"
  done
done
