#!/usr/bin/env bash
# Data parallel on this machine: one process with T threads against `mpirun -np 2` ranks with
# T / 2 threads each, on the same global batch, for L15M (batch 8 x 256) and GPT-2 124M (batch
# 4 x 256): the median step time (steps 3 on, from each run's metrics), its ratio to the one
# process, the time in collectives and the part of it the compute thread waited for, and each
# rank's peak RSS during training (as the run reports it, before the export; the one process's
# from /usr/bin/time, its export included) for ZeRO 0, 1, 2 and bf16 gradients, and for the model
# parallel runs on the same batches: tensor parallel (--tp 2) and pipeline parallel (--pp 2, the
# global batch as 4 micro-batches; the one process then accumulates the same 4, so the loss is
# the same). One configuration after the other, in rounds.
# Usage: bench/dist_train.sh [WORKDIR]   (ROUNDS=2 STEPS=8 MODELS="l15m gpt2" RUNS="dp tp pp";
# about 10 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
NEXUS=${NEXUS:-build/nexus}
W=${1:-/tmp/nexus-dist}
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-8}
MODELS=${MODELS:-"l15m gpt2"}
THREADS=${THREADS:-2}
RUNS=${RUNS:-"dp tp pp"}
command -v mpirun > /dev/null || { echo "dist_train: no mpirun (make deps)" >&2; exit 1; }
[ -f "$SHARED/data/tinyshakespeare.txt" ] || { echo "dist_train: $SHARED/data/tinyshakespeare.txt not found" >&2; exit 1; }
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(mpirun -np 2 --oversubscribe --bind-to none)
half=$((THREADS / 2 > 0 ? THREADS / 2 : 1))

args_for() {
  case $1 in
    l15m) echo "--shape 288,6,6,6,768,32000 --tokenizer $SHARED/vocab/ggml-vocab-llama-spm.gguf --seq 256" ;;
    gpt2) echo "--arch gpt2 --shape 768,12,12,12,3072,50257 --tokenizer $SHARED/vocab/ggml-vocab-gpt-2.gguf --seq 256" ;;
  esac
}
global_batch() { case $1 in l15m) echo 8 ;; gpt2) echo 4 ;; esac; }

# median step seconds (steps 3..) of a metrics file
median() {
  python3 - "$1" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
e = [r[i]["elapsed_s"] - r[i - 1]["elapsed_s"] for i in range(2, len(r))]
print(f"{statistics.median(e):.3f}")
PY
}

printf '%-5s %-6s %-22s %8s %7s %9s %9s %s\n' round model run "step s" ratio "comm s" "waited s" "peak RSS per rank"
for round in $(seq 1 "$ROUNDS"); do
  for model in $MODELS; do
    a=$(args_for "$model")
    B=$(global_batch "$model")
    common="$a --data $SHARED/data/tinyshakespeare.txt --steps $STEPS --clip 0 --lr 1e-4 --prefetch 1"
    base=""
    runs=("1 x $THREADS threads")
    case " $RUNS " in *" dp "*) runs+=("2 ranks, ZeRO 0" "2 ranks, ZeRO 1" "2 ranks, ZeRO 2" "2 ranks, bf16") ;; esac
    case " $RUNS " in *" tp "*) runs+=("tp 2") ;; esac
    case " $RUNS " in *" pp "*) runs+=("1 x $THREADS, accum 4" "pp 2, 4 micro-batches") ;; esac
    for run in "${runs[@]}"; do
      m="$W/$model-$round-${run// /_}.jsonl"; rm -f "$m"
      log="$W/$model.log"
      case $run in
        "1 x $THREADS threads") /usr/bin/time -f "rss %M" "$NEXUS" train $common --batch "$B" -t "$THREADS" \
              --metrics "$m" -o "$W/o.gguf" > "$log" 2>&1 ;;
        1*) /usr/bin/time -f "rss %M" "$NEXUS" train $common --batch $((B / 4)) --accum 4 \
              -t "$THREADS" --metrics "$m" -o "$W/o.gguf" > "$log" 2>&1 ;;
        tp*) "${MPI[@]}" "$NEXUS" train $common --batch "$B" -t "$half" --tp 2 --metrics "$m" \
              -o "$W/o.gguf" > "$log" 2>&1 ;;
        pp*) "${MPI[@]}" "$NEXUS" train $common --batch $((B / 4)) --micro-batches 4 -t "$half" \
              --pp 2 --metrics "$m" -o "$W/o.gguf" > "$log" 2>&1 ;;
        *) zero=0; dt=f32
           case $run in *"ZeRO 1"*) zero=1 ;; *"ZeRO 2"*) zero=2 ;; *bf16*) dt=bf16 ;; esac
           "${MPI[@]}" "$NEXUS" train $common --batch $((B / 2)) \
             -t "$half" --zero "$zero" --comm-dtype "$dt" --metrics "$m" -o "$W/o.gguf" > "$log" 2>&1 ;;
      esac
      s=$(median "$m")
      [ -z "$base" ] && base=$s
      ratio=$(python3 -c "print(f'{$base / $s:.2f}')")
      comm=$(grep -o '[0-9.]* s inside MPI' "$log" | cut -d' ' -f1 || true)
      waited=$(grep -o '[0-9.]* s waited for it' "$log" | cut -d' ' -f1 || true)
      rss=$(grep -o '^rss [0-9]*' "$log" | awk '{printf "%.1f MiB", $2 / 1024}' || true)
      [ -z "$rss" ] && rss=$(grep -o 'peak RSS by rank: .*' "$log" | cut -d: -f2- | sed 's/^ //')
      printf '%-5s %-6s %-22s %8s %7s %9s %9s %s\n' "$round" "$model" "$run" "$s" "$ratio" "${comm:--}" "${waited:--}" "$rss"
    done
  done
done
