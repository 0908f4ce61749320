#!/usr/bin/env bash
# Stands in for `nexus train` in the bench/train_compare.py test: writes a metrics JSONL with one
# row per step, 0.5 s apart (steps 2..N: 0.5 s each), to the --metrics path. FAKE_TRAIN_FAIL=1
# makes it fail instead.
set -euo pipefail
[[ "${FAKE_TRAIN_FAIL:-0}" == 1 ]] && { echo "fake nexus: failing on purpose" >&2; exit 3; }
metrics="" steps=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --metrics) metrics="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) shift ;;
  esac
done
[[ -n "$metrics" ]] || { echo "fake nexus: no --metrics" >&2; exit 2; }
for ((s = 1; s <= steps; s++)); do
  printf '{"step":%d,"loss":1.0,"elapsed_s":%d.%d}\n' "$s" $(((2 + s) / 2)) $((s % 2 * 5)) >>"$metrics"
done
