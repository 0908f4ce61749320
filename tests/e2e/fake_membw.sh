#!/usr/bin/env bash
# A stand-in for nexus_membw in tests of bench/compare.sh --membw: prints nexus_membw-shaped JSON
# (--json) whose mean_gbps is 10, 20, 30, ... on successive calls, counted in $FAKE_MEMBW_STATE.
set -euo pipefail
json=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -t|-r|-s) shift 2 ;;
    --json) json=1; shift ;;
    *) echo "fake_membw: unknown option $1" >&2; exit 1 ;;
  esac
done
[[ "$json" == 1 ]] || { echo "fake_membw: only --json" >&2; exit 1; }
state="${FAKE_MEMBW_STATE:?FAKE_MEMBW_STATE must name a counter file}"
k=$(( $(cat "$state" 2>/dev/null || echo 0) + 1 ))
echo "$k" > "$state"
printf '{"tool": "membw", "n_threads": 1, "best_gbps": %d, "mean_gbps": %d}\n' $((k * 10)) $((k * 10))
