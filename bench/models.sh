#!/usr/bin/env bash
# Makes the benchmark model matrix: shapes L15M, L110M, Q06B x types f32, f16, q8_0, q4_0, q4_k,
# as OUTDIR/SHAPE-TYPE.gguf (e.g. models/L15M-q8_0.gguf), with `nexus gen-model`. Existing files
# are kept (delete them to regenerate). About 6 GB in all; Q06B-f32 alone is 2.4 GB.
#
# usage: bench/models.sh [OUTDIR]   (default: build/bench-models, which git ignores)
# env: NEXUS_BIN (default build/nexus), SHAPES, TYPES, SEED (default 1)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../build/bench-models}"
nexus="${NEXUS_BIN:-$here/../build/nexus}"
shapes="${SHAPES:-L15M L110M Q06B}"
types="${TYPES:-f32 f16 q8_0 q4_0 q4_k}"
seed="${SEED:-1}"

[[ -x "$nexus" ]] || { echo "models.sh: error: nexus binary '$nexus' not found" >&2; exit 1; }
mkdir -p "$out"
failed=0
for shape in $shapes; do
  for type in $types; do
    f="$out/$shape-$type.gguf"
    if [[ -f "$f" ]]; then
      echo "models.sh: $f exists, kept"
      continue
    fi
    if ! "$nexus" gen-model --shape "$shape" --type "$type" --seed "$seed" -o "$f"; then
      echo "models.sh: error: could not make $f" >&2
      failed=1
    fi
  done
done
exit "$failed"
