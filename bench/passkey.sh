#!/usr/bin/env bash
# Passkey retrieval with a length curriculum (docs/performance/long_term_memory.md): a small
# nexus-ltm (128 wide, 4 layers of 4 heads, segments of 128 tokens, KIND infini or titans) and the
# same-size llama with a sliding window of 128 tokens, both with stories260K's tokenizer and the
# same two stages, one sample a line (train --documents):
#   1. samples of 128 tokens (key and question in one segment), STEPS1 steps: retrieval by
#      attention;
#   2. from stage 1, samples of 128 to 640 tokens (the key up to four segments back), STEPS2
#      steps: retrieval across segments, which only the memory can carry.
# Then `nexus passkey eval` at each of LENGTHS (COUNT samples each, greedy): accuracy, the cache
# and memory bytes, prompt tokens/s.
# Usage: bench/passkey.sh [WORKDIR]
#   (KIND=infini STEPS1=4000 STEPS2=2500 LENGTHS="640 2048 8192 32768 131072" COUNT=50
#   MODELS="ltm swa"; about an hour on 2 cores for both, most of it training)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-passkey}
SHARED=${SHARED:-../shared}
KIND=${KIND:-infini}
STEPS1=${STEPS1:-4000}
STEPS2=${STEPS2:-2500}
LENGTHS=${LENGTHS:-"640 2048 8192 32768 131072"}
COUNT=${COUNT:-50}
MODELS=${MODELS:-"ltm swa"}
TOK=$SHARED/models/stories260K.gguf
[ -f "$TOK" ] || { echo "passkey: $TOK not found" >&2; exit 1; }
mkdir -p "$W"
[ -f "$W/s1.txt" ] || "$NEXUS" passkey make --tokenizer "$TOK" -o "$W/s1.txt" --length 128 \
  -n 20000 --seed 2
[ -f "$W/s2.txt" ] || "$NEXUS" passkey make --tokenizer "$TOK" -o "$W/s2.txt" --min-length 128 \
  --length 640 -n 30000 --seed 3
common="--tokenizer $TOK --documents -t 2"
train() {  # NAME STAGE1-FLAGS
  local name=$1 arch=$2
  [ -f "$W/$name-1.gguf" ] || "$NEXUS" train $arch --shape 128,4,4,4,384 $common \
    --data "$W/s1.txt" --batch 16 --seq 128 --steps "$STEPS1" --lr 2e-3 --warmup 100 \
    -o "$W/$name-1.gguf" > "$W/$name-1.log" 2>&1
  [ -f "$W/$name-2.gguf" ] || "$NEXUS" train --init "$W/$name-1.gguf" $common \
    --data "$W/s2.txt" --batch 8 --seq 640 --steps "$STEPS2" --lr 1e-3 --warmup 50 \
    -o "$W/$name-2.gguf" > "$W/$name-2.log" 2>&1
}
names=()
for m in $MODELS; do
  case $m in
    ltm) names+=("ltm-$KIND")
      train "ltm-$KIND" "--arch nexus-ltm --memory-kind $KIND --memory-segment 128" ;;
    swa) names+=(swa); train swa "--arch llama --sliding-window 128" ;;
    *) echo "passkey: MODELS takes ltm and swa, not '$m'" >&2; exit 1 ;;
  esac
done
for n in $LENGTHS; do
  for m in "${names[@]}"; do
    c=$COUNT
    [ "$n" -ge 32768 ] && c=$((COUNT / 5))  # fewer samples where each takes seconds
    [ "$n" -ge 131072 ] && c=$((COUNT / 10))
    printf '%-12s %6s  ' "$m" "$n"
    "$NEXUS" passkey eval -m "$W/$m-2.gguf" --length "$n" -n "$c" -t 2 --seed 7
  done
done
