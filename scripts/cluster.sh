#!/usr/bin/env bash
# A local nexus cluster on loopback: N `nexus serve` replicas sharing a redis-server response
# cache, nginx in front (least connections, /health checks, retries), and prometheus scraping
# every replica. docs/SERVING.md ("Replicas") explains the setup and the numbers.
#
#   scripts/cluster.sh start -m MODEL.gguf [-n 2] [--port 8080] [--dir DIR] [-t THREADS]
#                            [--no-redis] [--no-prometheus] [-- EXTRA nexus serve FLAGS]
#   scripts/cluster.sh stop [--dir DIR]           # SIGTERM (in-flight requests finish), then wait
#   scripts/cluster.sh status [--dir DIR]
#   scripts/cluster.sh kill-replica I [--dir DIR]   # SIGKILL replica I (1-based), for fault tests
#   scripts/cluster.sh start-replica I [--dir DIR]  # start it again with its first command line
#
# Ports: nginx PORT, replicas PORT+1..PORT+N, redis PORT+100, prometheus PORT+101.
set -euo pipefail

die() { echo "cluster.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NEXUS="${NEXUS:-$ROOT/build/nexus}"
CMD="${1:-}"; [ -n "$CMD" ] || usage; shift
DIR="$ROOT/build/cluster"
MODEL=""; N=2; PORT=8080; THREADS=""; REDIS=1; PROM=1; EXTRA=(); WHICH=""
while [ $# -gt 0 ]; do
  case "$1" in
    -m|--model) MODEL="$2"; shift 2 ;;
    -n|--replicas) N="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    -t|--threads) THREADS="$2"; shift 2 ;;
    --no-redis) REDIS=0; shift ;;
    --no-prometheus) PROM=0; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    [0-9]*) WHICH="$1"; shift ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

pidfile() { echo "$DIR/pids/$1.pid"; }
# Running, not a zombie (a killed replica's parent is gone, and init may not have reaped it yet).
alive() {
  local pid
  [ -f "$(pidfile "$1")" ] || return 1
  pid="$(cat "$(pidfile "$1")")"
  kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ]
}
# Waits up to $2 s for URL $1 to answer 2xx.
wait_http() {
  local t=0
  until curl -sf -m 1 -o /dev/null "$1"; do
    t=$((t + 1)); [ "$t" -le $(($2 * 5)) ] || return 1; sleep 0.2
  done
}
# Starts "$@" in its own session, logging to logs/$NAME.log, its pid in pids/$NAME.pid.
launch() {
  local name="$1"; shift
  setsid "$@" > "$DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$name")"
}

# The upstream block, with replicas that fail /health marked down (nginx's own checks are passive).
write_upstream() {
  local health="$1" i port
  {
    echo "upstream nexus_replicas {"
    echo "  least_conn;"
    for i in $(seq 1 "$N"); do
      port=$((PORT + i))
      if [ "${health:$((i - 1)):1}" = 1 ]; then
        echo "  server 127.0.0.1:$port max_fails=1 fail_timeout=2s;"
      else
        echo "  server 127.0.0.1:$port down;"
      fi
    done
    echo "}"
  } > "$DIR/upstream.conf.tmp"
  mv "$DIR/upstream.conf.tmp" "$DIR/upstream.conf"
}

write_nginx_conf() {
  mkdir -p "$DIR/nginx/tmp"
  cat > "$DIR/nginx.conf" <<EOF
load_module /usr/lib/nginx/modules/ngx_http_js_module.so;
daemon off;
worker_processes 1;
pid $DIR/nginx/nginx.pid;
error_log $DIR/logs/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log $DIR/logs/nginx-access.log;
  client_body_temp_path $DIR/nginx/tmp/body;
  proxy_temp_path $DIR/nginx/tmp/proxy;
  fastcgi_temp_path $DIR/nginx/tmp/fastcgi;
  uwsgi_temp_path $DIR/nginx/tmp/uwsgi;
  scgi_temp_path $DIR/nginx/tmp/scgi;
  client_max_body_size 8m;
  js_import sse from $ROOT/deploy/nginx/sse_guard.js;
  js_var \$sse_tail "";
  include $DIR/upstream.conf;
  server {
    listen 127.0.0.1:$PORT;
    location / {
      proxy_pass http://nexus_replicas;
      # HTTP/1.0 to the replicas: streams end with the connection, so sse_guard.js sees a stream
      # that a dying replica cut short (see deploy/nginx/sse_guard.js).
      proxy_http_version 1.0;
      proxy_buffering off;
      proxy_connect_timeout 1s;
      proxy_read_timeout 600s;
      # Generation has no side effects: a request whose replica failed before answering is sent to
      # another one (POST included), at most once more.
      proxy_next_upstream error timeout http_502 http_503 non_idempotent;
      proxy_next_upstream_tries 2;
      add_header X-Nexus-Upstream \$upstream_addr always;
      js_body_filter sse.guard;
    }
  }
}
EOF
}

write_prometheus_conf() {
  {
    echo "global:"
    echo "  scrape_interval: 5s"
    echo "scrape_configs:"
    echo "  - job_name: nexus"
    echo "    static_configs:"
    echo "      - targets:"
    for i in $(seq 1 "$N"); do echo "        - 127.0.0.1:$((PORT + i))"; done
  } > "$DIR/prometheus.yml"
}

# Polls every replica's /health twice a second and reloads nginx when the healthy set changes.
health_loop() {
  local last="" now i
  while true; do
    now=""
    for i in $(seq 1 "$N"); do
      if curl -sf -m 1 -o /dev/null "http://127.0.0.1:$((PORT + i))/health"; then now+=1; else now+=0; fi
    done
    if [ "$now" != "$last" ]; then
      # All down: list them all, so nginx answers 502 at once rather than "no live upstreams".
      [ "$now" = "${now//1/}" ] && write_upstream "${now//0/1}" || write_upstream "$now"
      nginx -p "$DIR/nginx" -c "$DIR/nginx.conf" -s reload 2>> "$DIR/logs/health.log" || true
      echo "$(date +%T) healthy: $now" >> "$DIR/logs/health.log"
      last="$now"
    fi
    sleep 0.5
  done
}

start_replica() {
  local i="$1"
  [ -f "$DIR/replica-$i.cmd" ] || die "no replica $i in $DIR"
  alive "replica-$i" && die "replica $i is running"
  # shellcheck disable=SC2046
  launch "replica-$i" bash -c "exec $(cat "$DIR/replica-$i.cmd")"
}

stop_all() {
  [ -d "$DIR/pids" ] || { echo "cluster.sh: nothing running in $DIR"; return 0; }
  local f pid pids=()
  for f in "$DIR"/pids/*.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    # The health loop first, so it does not reload nginx while it stops.
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); fi
  done
  local t=0
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$t" -lt 150 ]; do sleep 0.1; t=$((t + 1)); done
    kill -0 "$pid" 2>/dev/null && { echo "cluster.sh: pid $pid did not stop; SIGKILL" >&2; kill -KILL "$pid" 2>/dev/null || true; }
  done
  rm -f "$DIR"/pids/*.pid
  echo "cluster.sh: stopped"
}

case "$CMD" in
  start)
    [ -n "$MODEL" ] || die "start needs -m MODEL.gguf"
    [ -f "$MODEL" ] || die "model '$MODEL' not found"
    [ -x "$NEXUS" ] || die "no nexus binary at $NEXUS (run make build, or set NEXUS=)"
    [[ "$N" =~ ^[1-9][0-9]*$ ]] || die "-n must be a positive number of replicas"
    [[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65000 ] ||
      die "--port must be in [1024, 65000]"
    for tool in nginx curl; do command -v "$tool" >/dev/null || die "needs $tool (make deps)"; done
    [ -f /usr/lib/nginx/modules/ngx_http_js_module.so ] ||
      die "needs nginx's njs module (Debian's libnginx-mod-http-js; make deps)"
    [ "$REDIS" = 0 ] || command -v redis-server >/dev/null || die "needs redis-server (make deps)"
    [ "$PROM" = 0 ] || command -v prometheus >/dev/null || die "needs prometheus (make deps)"
    if [ -d "$DIR/pids" ] && ls "$DIR"/pids/*.pid >/dev/null 2>&1; then
      for f in "$DIR"/pids/*.pid; do
        kill -0 "$(cat "$f")" 2>/dev/null && die "a cluster is running in $DIR (cluster.sh stop --dir $DIR)"
      done
    fi
    for p in "$PORT" $(seq $((PORT + 1)) $((PORT + N))) $((PORT + 100)) $((PORT + 101)); do
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p is in use"
    done
    MODEL="$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")"
    rm -rf "$DIR"; mkdir -p "$DIR/pids" "$DIR/logs" "$DIR/nginx"
    [ -n "$THREADS" ] || THREADS=$(( $(nproc) / N > 0 ? $(nproc) / N : 1 ))
    echo "N=$N PORT=$PORT" > "$DIR/cluster.env"
    STARTED=0
    trap '[ "$STARTED" = 1 ] || { echo "cluster.sh: start failed; stopping what started" >&2; stop_all; }' EXIT
    cache=()
    if [ "$REDIS" = 1 ]; then
      launch redis redis-server --port $((PORT + 100)) --bind 127.0.0.1 --save "" --appendonly no \
        --maxmemory 256mb --maxmemory-policy allkeys-lru
      cache=(--cache "redis://127.0.0.1:$((PORT + 100))")
    fi
    for i in $(seq 1 "$N"); do
      printf '%q ' "$NEXUS" serve -m "$MODEL" --host 127.0.0.1 --port $((PORT + i)) -t "$THREADS" \
        "${cache[@]}" "${EXTRA[@]}" > "$DIR/replica-$i.cmd"
      start_replica "$i"
    done
    for i in $(seq 1 "$N"); do
      t=0
      until curl -sf -m 1 -o /dev/null "http://127.0.0.1:$((PORT + i))/health"; do
        alive "replica-$i" || die "replica $i exited: $(tail -1 "$DIR/logs/replica-$i.log")"
        t=$((t + 1)); [ "$t" -le 1500 ] || die "replica $i not healthy after 300 s (see $DIR/logs)"
        sleep 0.2
      done
    done
    write_upstream "$(printf '1%.0s' $(seq 1 "$N"))"
    write_nginx_conf
    nginx -p "$DIR/nginx" -c "$DIR/nginx.conf" -t > "$DIR/logs/nginx-test.log" 2>&1 ||
      die "nginx refused its configuration: $(tail -1 "$DIR/logs/nginx-test.log")"
    launch nginx nginx -p "$DIR/nginx" -c "$DIR/nginx.conf"
    wait_http "http://127.0.0.1:$PORT/health" 30 || die "nginx did not answer (see $DIR/logs)"
    launch health "$0" __health --dir "$DIR" -n "$N" --port "$PORT"
    if [ "$PROM" = 1 ]; then
      write_prometheus_conf
      launch prometheus prometheus --config.file="$DIR/prometheus.yml" \
        --storage.tsdb.path="$DIR/prometheus-data" --web.listen-address="127.0.0.1:$((PORT + 101))"
      wait_http "http://127.0.0.1:$((PORT + 101))/-/ready" 60 || die "prometheus did not start"
    fi
    STARTED=1
    echo "cluster.sh: $N replicas of $(basename "$MODEL") behind http://127.0.0.1:$PORT"
    [ "$REDIS" = 0 ] || echo "cluster.sh: redis on 127.0.0.1:$((PORT + 100))"
    [ "$PROM" = 0 ] || echo "cluster.sh: prometheus on http://127.0.0.1:$((PORT + 101))"
    echo "cluster.sh: logs in $DIR/logs; stop with: $0 stop --dir $DIR"
    ;;
  __health)
    health_loop ;;
  stop)
    stop_all ;;
  status)
    [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR"
    for f in "$DIR"/pids/*.pid; do
      [ -f "$f" ] || continue
      name="$(basename "$f" .pid)"
      if alive "$name"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: stopped"; fi
    done ;;
  kill-replica|start-replica)
    [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR"
    # shellcheck disable=SC1091
    . "$DIR/cluster.env"
    [[ "$WHICH" =~ ^[0-9]+$ ]] && [ "$WHICH" -ge 1 ] && [ "$WHICH" -le "$N" ] ||
      die "$CMD needs a replica number in [1, $N]"
    if [ "$CMD" = kill-replica ]; then
      alive "replica-$WHICH" || die "replica $WHICH is not running"
      kill -KILL "$(cat "$(pidfile "replica-$WHICH")")"
      echo "cluster.sh: replica $WHICH killed"
    else
      start_replica "$WHICH"
      echo "cluster.sh: replica $WHICH starting (pid $(cat "$(pidfile "replica-$WHICH")"))"
    fi ;;
  *) usage ;;
esac
