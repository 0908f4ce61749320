#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU (docs/ARCHITECTURE.md, "Devices"): builds with
# the CUDA backend for the GPU's architecture, runs every test that touches a CUDA device (they
# skip, naming the reason, where none is present) and the CLI on --device cuda, and collects the
# logs and the GPU's description under OUT (default $OUT, else build-cuda/gpu-check).
#
#   scripts/gpu_check.sh [OUT]
# Exit status: 0 when the build and the tests passed; the CLI's answers are recorded, not judged
# (the backend has sixteen ops but not yet every one a model runs, so --device cuda is expected to
# stop with a clear "no kernel" error naming the first op without one).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-${OUT:-$ROOT/build-cuda/gpu-check}}
BUILD=$ROOT/build-cuda
mkdir -p "$OUT"
log() { echo "gpu_check: $*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"

{ nvidia-smi || echo "no nvidia-smi"; nvcc --version || echo "no nvcc"; } > "$OUT/gpu.txt" 2>&1
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
ARCH=${ARCH:-90}
log "compute capability $ARCH ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"

start=$(date +%s)
if ! cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXUS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DNEXUS_BUILD_BENCH=OFF > "$OUT/configure.log" 2>&1 ||
   ! cmake --build "$BUILD" -j "$(nproc)" --target nexus nexus_tests > "$OUT/build.log" 2>&1; then
  log "build FAILED after $(( $(date +%s) - start )) s (see build.log)"
  tail -30 "$OUT/build.log"
  exit 1
fi
log "built in $(( $(date +%s) - start )) s"

status=0
"$BUILD/tests/nexus_tests" --gtest_filter='Device*:Cuda*:CachingPool*' \
  --gtest_output="json:$OUT/tests.json" > "$OUT/tests.log" 2>&1 || status=1
log "device tests: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "Skipped|FAILED" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"

MODEL=$ROOT/../shared/models/stories260K.gguf
if [ -f "$MODEL" ]; then
  "$BUILD/nexus" run -m "$MODEL" -p "Once upon a time" -n 32 --temp 0 --device cuda \
    > "$OUT/run_cuda.log" 2>&1
  log "nexus run --device cuda: exit $? ($(tail -1 "$OUT/run_cuda.log"))"
fi
log "results in $OUT"
exit $status
