#!/usr/bin/env bash
# CTest entry of the OpenAI Node SDK conformance run: starts `nexus serve` on a free loopback port
# with an API key, runs conformance.mjs against it, stops the server. Exits 77 (skipped) when
# node, the SDK (make deps installs it into tests/node) or the model is missing.
set -uo pipefail
NEXUS=$1
MODEL=$2
HERE=$(cd "$(dirname "$0")" && pwd)
command -v node > /dev/null || { echo "skip: node is not installed"; exit 77; }
[ -d "$HERE/node_modules/openai" ] || { echo "skip: no $HERE/node_modules/openai (run make deps)"; exit 77; }
[ -f "$MODEL" ] || { echo "skip: needs $MODEL"; exit 77; }
LOG=$(mktemp)
"$NEXUS" serve -m "$MODEL" --port 0 -t 1 -c 256 --api-key conformance-key 2> "$LOG" &
PID=$!
trap 'kill $PID 2> /dev/null; wait $PID 2> /dev/null; rm -f "$LOG"' EXIT
PORT=""
for _ in $(seq 1 300); do
  if grep -q "ready" "$LOG"; then
    PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG" | head -1)
    break
  fi
  kill -0 $PID 2> /dev/null || { cat "$LOG"; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { echo "the server did not become ready"; cat "$LOG"; exit 1; }
MODEL_NAME=$(basename "$MODEL" .gguf)
node "$HERE/conformance.mjs" "http://127.0.0.1:$PORT/v1" "$MODEL_NAME" conformance-key
