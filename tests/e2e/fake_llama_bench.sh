#!/usr/bin/env bash
# A stand-in for llama.cpp's llama-bench in tests of bench/compare.sh: accepts the flags the
# script passes and prints llama-bench-shaped JSON (-o json) with fixed throughputs.
set -euo pipefail
model="" p=512 n=128 d=0 t=4 r=5 o=md
while [[ $# -gt 0 ]]; do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    -p) p="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    -d) d="$2"; shift 2 ;;
    -t) t="$2"; shift 2 ;;
    -r) r="$2"; shift 2 ;;
    -o) o="$2"; shift 2 ;;
    -ctk|-ctv) shift 2 ;;
    *) echo "fake_llama_bench: unknown option $1" >&2; exit 1 ;;
  esac
done
[[ "$o" == json ]] || { echo "fake_llama_bench: only -o json" >&2; exit 1; }
[[ -f "$model" ]] || { echo "fake_llama_bench: no model '$model'" >&2; exit 1; }
echo "fake_llama_bench: loading $model" >&2
obj() {  # $1 n_prompt, $2 n_gen, $3 t/s
  printf '  {"build_commit": "fake000", "build_number": 1, "cpu_info": "fake cpu", '
  printf '"backends": "CPU", "model_filename": "%s", "model_type": "llama ?B F32", ' "$model"
  printf '"model_size": 1, "model_n_params": 1, "n_threads": %s, "n_prompt": %s, "n_gen": %s, ' \
    "$t" "$1" "$2"
  printf '"n_depth": %s, ' "$d"
  printf '"avg_ts": %s, "stddev_ts": 0.5, "samples_ts": [%s], "samples_ns": [1000000]}' "$3" "$3"
}
echo "["
sep=""
if [[ "$p" != 0 ]]; then echo -n "$sep"; obj "$p" 0 200.0; sep=$',\n'; fi
if [[ "$n" != 0 ]]; then echo -n "$sep"; obj 0 "$n" 20.0; fi
echo
echo "]"
