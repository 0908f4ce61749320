#!/usr/bin/env bash
# Time to first token, side by side: wall time of a whole process that loads MODEL, reads a prompt
# of about --prompt-tokens tokens and generates one token, for `nexus run` and llama.cpp's
# llama-completion, alternately (nexus, peer, nexus, peer, ...), -r times each after one warm-up
# each (page cache warm for both). Both get the same context size, threads and greedy sampling.
# Prints each run and the medians with the ratio peer / nexus (> 1: nexus reaches its first token
# sooner).
#
# usage: bench/ttft.sh LLAMA_COMPLETION MODEL.gguf [-t THREADS] [-c CTX] [-r REPS]
#                      [--prompt-tokens N] [--nexus PATH]
# LLAMA_COMPLETION is the path of an already built llama-completion binary (never built here).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "ttft.sh: error: $*" >&2; exit 1; }
[[ $# -ge 2 ]] || die "usage: ttft.sh LLAMA_COMPLETION MODEL.gguf [-t T] [-c CTX] [-r R]"
peer="$1" model="$2"; shift 2
[[ -x "$peer" ]] || die "llama-completion binary '$peer' is not an executable file"
[[ -f "$model" ]] || die "model '$model' not found"
threads="$(nproc)" ctx=4096 reps=5 words=48
nexus="${NEXUS_BIN:-$here/../build/nexus}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -t) threads="$2"; shift 2 ;;
    -c) ctx="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    --prompt-tokens) words="$2"; shift 2 ;;
    --nexus) nexus="$2"; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ -x "$nexus" ]] || die "nexus binary '$nexus' not found (build it, or pass --nexus PATH)"

# A prompt of common English words: about one token per word for BPE vocabularies.
prompt=""
vocab=(the cat sat on a mat and then it ran to see what was in the garden near old house)
for ((i = 0; i < words; ++i)); do prompt+="${vocab[i % ${#vocab[@]}]} "; done

run_nexus() {
  "$nexus" run -m "$model" -p "$prompt" -n 1 --temp 0 -t "$threads" -c "$ctx" >/dev/null 2>&1
}
run_peer() {
  "$peer" -m "$model" -p "$prompt" -n 1 --temp 0 -t "$threads" -c "$ctx" -no-cnv \
    >/dev/null 2>&1 </dev/null
}
timed() {  # prints the wall seconds of "$@"
  local t0 t1
  t0=$(date +%s.%N)
  "$@" || die "'$1' failed (run it by hand to see why)"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}

run_nexus || die "nexus run failed on $model"
run_peer || die "llama-completion failed on $model"
ns=() ps=()
for ((r = 1; r <= reps; ++r)); do
  n=$(timed run_nexus); p=$(timed run_peer)
  ns+=("$n"); ps+=("$p")
  printf 'run %d: nexus %.3f s  llama.cpp %.3f s\n' "$r" "$n" "$p"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mn=$(median "${ns[@]}"); mp=$(median "${ps[@]}")
printf '%s: time to first token (median of %d, -t %s, -c %s, %s-word prompt): nexus %.3f s, llama.cpp %.3f s, ratio llama.cpp / nexus %.2f\n' \
  "$(basename "$model")" "$reps" "$threads" "$ctx" "$words" "$mn" "$mp" "$(awk -v a="$mp" -v b="$mn" 'BEGIN { print a / b }')"
