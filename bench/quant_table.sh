#!/usr/bin/env bash
# One model in every type: file size, perplexity (`nexus perplexity`) and prefill/decode speed
# (`nexus bench`, all files in one run), as a markdown table (docs/COMPRESSION.md, "Per model").
#
# usage: bench/quant_table.sh MODEL.gguf EVAL.txt [OUTDIR]
# env: NEXUS_BIN (default build/nexus), TYPES, CTX (perplexity chunk, default 128),
#      PP / TG (bench prompt and generated tokens, default 128 / 64), REPS (default 3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 2 ]] || { echo "usage: $0 MODEL.gguf EVAL.txt [OUTDIR]" >&2; exit 2; }
model="$1" eval_text="$2" out="${3:-$here/../build/quant-table}"
nexus="${NEXUS_BIN:-$here/../build/nexus}"
types="${TYPES:-F16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 Q3_K_M Q2_K W8A8}"
ctx="${CTX:-128}" pp="${PP:-128}" tg="${TG:-64}" reps="${REPS:-3}"
for f in "$model" "$eval_text"; do
  [[ -f "$f" ]] || { echo "quant_table.sh: error: '$f' not found" >&2; exit 1; }
done
mkdir -p "$out"

files=("$model") names=("F32")
for t in $types; do
  f="$out/$t.gguf"
  if "$nexus" quantize -q "$model" "$f" "$t" > /dev/null 2>&1; then
    files+=("$f") names+=("$t")
  else
    echo "quant_table.sh: warning: $t failed" >&2
  fi
done
list=$(IFS=,; echo "${files[*]}")
"$nexus" bench -m "$list" -p "$pp" -n "$tg" -t 2 -r "$reps" -o csv > "$out/bench.csv"
# avg_ts of FILE's TEST (pp$pp or tg$tg) from the bench CSV.
speed() {
  python3 - "$out/bench.csv" "$1" "$2" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    if row["model_filename"] == sys.argv[2] and row["test"] == sys.argv[3]:
        print(f"{float(row['avg_ts']):,.0f}")
PY
}
echo "| type | size | PPL | pp$pp t/s | tg$tg t/s |"
echo "|---|---|---|---|---|"
for i in "${!files[@]}"; do
  f="${files[$i]}"
  ppl=$("$nexus" perplexity -m "$f" -f "$eval_text" -c "$ctx" -t 2 2>&1 | grep -o 'PPL = [0-9.]*' | cut -d' ' -f3)
  echo "| ${names[$i]} | $(stat -c %s "$f") B | $ppl | $(speed "$f" "pp$pp") | $(speed "$f" "tg$tg") |"
done
