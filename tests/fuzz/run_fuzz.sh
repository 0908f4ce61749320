#!/usr/bin/env bash
# Builds the GGUF libFuzzer target with clang (preset `fuzz`, incrementally, in build-fuzz/) and
# fuzzes the reader for SECONDS over the committed seeds. Exit 77 means skipped (no usable clang).
# Usage: tests/fuzz/run_fuzz.sh [SECONDS] [extra libFuzzer flags...]   (env: NEXUS_FUZZ_JOBS=2)
set -euo pipefail

secs=${1:-15}
[ $# -gt 0 ] && shift
root=$(cd "${BASH_SOURCE[0]%/*}/../.." && pwd)
out="$root/build-fuzz"
jobs=${NEXUS_FUZZ_JOBS:-2}

skip() {
  echo "SKIP fuzz_gguf: $*"
  exit 77
}

[ "${NEXUS_SKIP_FUZZ:-0}" = 1 ] && skip "NEXUS_SKIP_FUZZ=1"
command -v clang++ >/dev/null || skip "clang++ not found (install clang and libclang-rt-14-dev: 'make deps')"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' >"$probe/p.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>"$probe/err"; then
  skip "clang++ cannot link a libFuzzer target (libclang-rt-14-dev missing?): $(head -n 1 "$probe/err")"
fi

# One fuzz build at a time (ctest may run this from several build trees at once).
mkdir -p "$out"
exec 9>"$out/.lock"
flock -w 900 9 || { echo "fuzz_gguf: build-fuzz/ is locked by another run"; exit 1; }

cd "$root"
if [ ! -f "$out/build.ninja" ]; then
  if ! cmake --preset fuzz >"$out/configure.log" 2>&1; then
    cat "$out/configure.log"
    exit 1
  fi
fi
if ! cmake --build "$out" -j "$jobs" --target fuzz_gguf >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log"
  exit 1
fi

# New interesting inputs go to build-fuzz/corpus (kept between runs); the seeds stay read-only.
mkdir -p "$out/corpus" "$out/artifacts"
log="$out/fuzz.log"
status=0
"$out/tests/fuzz_gguf" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -dict="$root/tests/fuzz/gguf.dict" -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
  "$@" "$out/corpus" "$root/tests/fuzz/corpus" >"$log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  tail -n 60 "$log"
  echo "fuzz_gguf: FAILED (exit $status); reproduce with: $out/tests/fuzz_gguf $out/artifacts/<file>"
  exit 1
fi
grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$log" || tail -n 5 "$log"
echo "fuzz_gguf: no crash in ${secs}s ($(ls "$out/corpus" | wc -l) inputs in build-fuzz/corpus)"
