#!/usr/bin/env bash
# Side-by-side throughput: runs `nexus bench` and llama.cpp's llama-bench on the same GGUF files,
# one test at a time and alternately (nexus, peer, nexus, peer, ...) so machine noise hits both,
# then prints a markdown table model | type | test | nexus t/s | llama.cpp t/s | ratio.
#
# usage: bench/compare.sh LLAMA_BENCH MODEL.gguf... [-p 512[,N...]] [-n 128[,N...]] [-d 0[,N...]]
#                         [-t THREADS] [-r REPS] [--kv-type f16] [--nexus PATH] [--out DIR]
#                         [--bandwidth GBPS | --membw PATH]
# -d runs every test after a context of N tokens (llama-bench's -d; passed to both tools only
# when not 0, so peers older than that flag still run the plain tests).
# With --bandwidth (the machine's read bandwidth, e.g. from build/nexus_membw), tg rows also show
# the bound bandwidth / bytes read per token and the fraction of it each engine reaches. With
# --membw PATH (a nexus_membw binary) the bandwidth is measured instead, before the first test and
# after every test, and each row's bound uses the mean of the two readings around its test: on a
# shared host the bandwidth moves by a quarter within minutes, so one reading for a whole run
# misstates the bound of the tests far from it.
# LLAMA_BENCH is the path of an already built llama-bench binary (this script never builds it).
# The nexus binary is --nexus, else $NEXUS_BIN, else build/nexus beside this script's checkout.
# Raw JSON of every run is kept in --out (default: a new temporary directory, printed at the end).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "compare.sh: error: $*" >&2; exit 1; }

[[ $# -ge 2 ]] || die "usage: compare.sh LLAMA_BENCH MODEL.gguf... [-p N] [-n N] [-t T] [-r R]"
peer="$1"; shift
[[ -x "$peer" ]] || die "llama-bench binary '$peer' is not an executable file"

models=() prompts="512" gens="128" depths="0" threads="$(nproc)" reps="5" kv="" out="" bw="0"
membw=""
nexus="${NEXUS_BIN:-$here/../build/nexus}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) prompts="$2"; shift 2 ;;
    -n) gens="$2"; shift 2 ;;
    -d) depths="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    --kv-type) kv="$2"; shift 2 ;;
    --nexus) nexus="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --bandwidth) bw="$2"; shift 2 ;;
    --membw) membw="$2"; shift 2 ;;
    -*) die "unknown option '$1'" ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ ${#models[@]} -gt 0 ]] || die "no model given"
[[ -x "$nexus" ]] || die "nexus binary '$nexus' not found (build it, or pass --nexus PATH)"
command -v python3 >/dev/null || die "python3 is needed to merge the results"
for m in "${models[@]}"; do [[ -f "$m" ]] || die "model '$m' not found"; done
[[ -z "$membw" || -x "$membw" ]] || die "--membw: '$membw' is not an executable file"
if [[ -z "$out" ]]; then out="$(mktemp -d "${TMPDIR:-/tmp}/nexus-compare.XXXXXX")"; fi
mkdir -p "$out"

kv_nexus=() kv_peer=()
if [[ -n "$kv" ]]; then kv_nexus=(--kv-type "$kv"); kv_peer=(-ctk "$kv" -ctv "$kv"); fi

# One line per test in the manifest: model, nexus JSON, peer JSON[, read bandwidth GB/s].
manifest="$out/manifest.tsv"
: > "$manifest"
i=0
read_bw() {  # one nexus_membw reading (mean GB/s), its JSON kept as membw-$i.json
  local j="$out/membw-$i.json"
  "$membw" -t "$threads" -r 3 -s 512 --json > "$j" 2> "$out/membw-$i.log" \
    || die "$membw failed (see $out/membw-$i.log)"
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["mean_gbps"])' "$j" \
    || die "$membw printed no mean_gbps (see $j)"
}
bw_before=""
[[ -z "$membw" ]] || bw_before="$(read_bw)"
run_pair() {  # $1 model, $2 n_prompt, $3 n_gen, $4 n_depth
  i=$((i + 1))
  local nj="$out/nexus-$i.json" pj="$out/peer-$i.json" depth=()
  [[ "$4" == 0 ]] || depth=(-d "$4")
  echo "compare.sh: [$i] $(basename "$1") p=$2 n=$3 d=$4: nexus" >&2
  "$nexus" bench -m "$1" -p "$2" -n "$3" "${depth[@]}" -t "$threads" -r "$reps" "${kv_nexus[@]}" \
    -o json > "$nj" 2> "$out/nexus-$i.log" || die "nexus bench failed (see $out/nexus-$i.log)"
  echo "compare.sh: [$i] $(basename "$1") p=$2 n=$3 d=$4: llama-bench" >&2
  "$peer" -m "$1" -p "$2" -n "$3" "${depth[@]}" -t "$threads" -r "$reps" "${kv_peer[@]}" -o json \
    > "$pj" 2> "$out/peer-$i.log" || die "llama-bench failed (see $out/peer-$i.log)"
  if [[ -z "$membw" ]]; then
    printf '%s\t%s\t%s\n' "$1" "$nj" "$pj" >> "$manifest"
    return
  fi
  local bw_after
  bw_after="$(read_bw)"
  printf '%s\t%s\t%s\t%s\n' "$1" "$nj" "$pj" \
    "$(python3 -c 'import sys; print((float(sys.argv[1]) + float(sys.argv[2])) / 2)' \
      "$bw_before" "$bw_after")" >> "$manifest"
  bw_before="$bw_after"
}

IFS=',' read -r -a plist <<< "$prompts"
IFS=',' read -r -a nlist <<< "$gens"
IFS=',' read -r -a dlist <<< "$depths"
for m in "${models[@]}"; do
  for d in "${dlist[@]}"; do
    [[ "$d" =~ ^[0-9]+$ ]] || die "-d: '$d' is not a token count"
    for p in "${plist[@]}"; do [[ "$p" == 0 ]] || run_pair "$m" "$p" 0 "$d"; done
    for n in "${nlist[@]}"; do [[ "$n" == 0 ]] || run_pair "$m" 0 "$n" "$d"; done
  done
done
[[ $i -gt 0 ]] || die "nothing to run: every -p and -n value is 0"

python3 "$here/compare_table.py" "$manifest" "$bw"
echo
echo "raw results: $out"
