#!/usr/bin/env bash
# Slot reduction of a trained long-term memory: a nexus-ltm model (128 wide, 4 layers of 4 heads of
# 32, segments of 64 tokens, KIND infini or titans; DEPTH=2 Titans' deep memory of HIDDEN units,
# whose slots are its hidden units) trained on the first 90% of tinyshakespeare
# with stories260K's tokenizer, reduced by `nexus memory-reduce` (calibration: 64 segments of the
# training part) to each setting below, and scored by `nexus perplexity` on the last 10% in chunks
# of 2048 tokens (each chunk's last 31 segments read the memory). Prints per setting the slots
# of each layer, the memory per sequence and the perplexity. Ratio 32 leaves one slot a head (two
# of the deep memory's 64 units): the floor the other settings are between.
# Usage: bench/ltm_reduce.sh [WORKDIR]
#   (KIND=infini DEPTH=1 HIDDEN=64 STEPS=1500; about 10 minutes on 2 cores, 15 for the deep memory)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-ltm-reduce}
SHARED=${SHARED:-../shared}
KIND=${KIND:-infini}
STEPS=${STEPS:-1500}
DEPTH=${DEPTH:-1}
HIDDEN=${HIDDEN:-64}
DATA=$SHARED/data/tinyshakespeare.txt
TOK=$SHARED/models/stories260K.gguf
[ -f "$DATA" ] || { echo "ltm_reduce: $DATA not found" >&2; exit 1; }
mkdir -p "$W"
n=$(wc -c < "$DATA")
head -c $((n * 9 / 10)) "$DATA" > "$W/train.txt"
tail -c $((n - n * 9 / 10)) "$DATA" > "$W/val.txt"
name=$KIND width=32 extra=""
if [ "$DEPTH" = 2 ]; then
  [ "$KIND" = titans ] || { echo "ltm_reduce: DEPTH=2 takes KIND=titans" >&2; exit 1; }
  name=deep width=$HIDDEN extra="--memory-depth 2 --memory-hidden $HIDDEN"
fi
M=$W/ltm-$name.gguf
# shellcheck disable=SC2086
[ -f "$M" ] || "$NEXUS" train --arch nexus-ltm --memory-kind "$KIND" --memory-segment 64 $extra \
  --shape 128,4,4,4,384 --tokenizer "$TOK" --data "$W/train.txt" --seq 512 --batch 8 \
  --steps "$STEPS" --lr 2e-3 --warmup 100 -t 2 -o "$M" > "$W/train-$name.log" 2>&1
ppl() { "$NEXUS" perplexity -m "$1" -f "$W/val.txt" -c 2048 -t 2 2>&1 |
  grep -o 'PPL = [0-9.]*' | awk '{print $3}'; }
bytes() { "$NEXUS" run -m "$1" -p "ROMEO:" -n 1 -t 1 --memory-stats 2>&1 |
  grep -o '([0-9]* bytes in all)' | tr -d '(' | awk '{print $1}'; }
slots() { "$NEXUS" info "$1" | awk '/memory.slots/ {$1=""; print substr($0, 2)}'; }
printf '%-22s %-14s %14s %10s\n' setting "slots a layer" "memory bytes" perplexity
printf '%-22s %-14s %14s %10s\n' full "$width $width $width $width" "$(bytes "$M")" "$(ppl "$M")"
for s in "--memory-energy 0.99" "--memory-compression-ratio 2" \
  "--memory-compression-ratio 4" "--memory-compression-ratio 4 --adaptive" \
  "--memory-compression-ratio 8" "--memory-compression-ratio 8 --adaptive" \
  "--memory-compression-ratio 32"; do
  R=$W/reduced.gguf
  "$NEXUS" memory-reduce "$M" "$R" -f "$W/train.txt" --segments 64 -q $s > /dev/null 2>&1
  printf '%-22s %-14s %14s %10s\n' "${s//--memory-/}" "$(slots "$R")" "$(bytes "$R")" "$(ppl "$R")"
done
