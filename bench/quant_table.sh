#!/usr/bin/env bash
# One model in every type: file size, perplexity (`nexus perplexity`) and prefill/decode speed
# (`nexus bench`, all files in one run), as a markdown table (docs/COMPRESSION.md, "Per model").
# With LLAMA_BIN (a folder holding llama-bench, built outside this repository) llama.cpp's speed
# on the same files follows, run right after nexus's.
#
# usage: bench/quant_table.sh MODEL.gguf EVAL.txt [OUTDIR]
# env: NEXUS_BIN (default build/nexus), LLAMA_BIN (optional), TYPES, CTX (perplexity chunk,
#      default 128), PP / TG (bench prompt and generated tokens, default 128 / 64), REPS (default 3)
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
llama=""
if [[ -n "${LLAMA_BIN:-}" ]]; then
  [[ -x "$LLAMA_BIN/llama-bench" ]] || { echo "quant_table.sh: error: no llama-bench in '$LLAMA_BIN'" >&2; exit 1; }
  margs=()
  for f in "${files[@]}"; do margs+=(-m "$f"); done
  "$LLAMA_BIN/llama-bench" "${margs[@]}" -p "$pp" -n "$tg" -t 2 -r "$reps" -o csv \
    > "$out/llama-bench.csv" 2> "$out/llama-bench.log"
  llama=1
fi
# avg_ts of FILE's prefill (pp) or decode (tg) from a bench CSV (nexus's names the test; llama-bench's
# gives n_prompt and n_gen).
speed() {
  python3 - "$1" "$2" "$3" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    test = row.get("test") or ("pp" if int(row["n_prompt"]) > 0 else "tg")
    if row["model_filename"] == sys.argv[2] and test.startswith(sys.argv[3]):
        print(f"{float(row['avg_ts']):,.0f}")
PY
}
if [[ -n "$llama" ]]; then
  echo "| type | size | PPL | pp$pp t/s | tg$tg t/s | llama.cpp pp$pp | llama.cpp tg$tg |"
  echo "|---|---|---|---|---|---|---|"
else
  echo "| type | size | PPL | pp$pp t/s | tg$tg t/s |"
  echo "|---|---|---|---|---|"
fi
for i in "${!files[@]}"; do
  f="${files[$i]}"
  ppl=$("$nexus" perplexity -m "$f" -f "$eval_text" -c "$ctx" -t 2 2>&1 | grep -o 'PPL = [0-9.]*' | cut -d' ' -f3)
  row="| ${names[$i]} | $(stat -c %s "$f") B | $ppl | $(speed "$out/bench.csv" "$f" pp) | $(speed "$out/bench.csv" "$f" tg) |"
  [[ -n "$llama" ]] && row="$row $(speed "$out/llama-bench.csv" "$f" pp) | $(speed "$out/llama-bench.csv" "$f" tg) |"
  echo "$row"
done
