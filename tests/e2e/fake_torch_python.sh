#!/usr/bin/env bash
# Stands in for the peer's python in the bench/train_compare.py test: `-c CODE` succeeds (the
# torch probe); `SCRIPT ... --out FILE` appends one bench_train.py-shaped result to FILE: 2048
# tokens/s, 1000 MiB peak RSS.
set -euo pipefail
[[ "${1:-}" == -c ]] && exit 0
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    *) shift ;;
  esac
done
[[ -n "$out" ]] || { echo "fake torch: no --out" >&2; exit 2; }
echo '{"kind": "train", "status": "ok", "tokens_per_s": 2048.0, "peak_rss_mib": 1000.0}' >>"$out"
