#!/usr/bin/env python3
"""The cluster's fault test: load through nginx to 2 replicas while one is killed with SIGKILL and
restarted (scripts/cluster.sh). Every request must end in a way the client can act on: a complete
answer (perhaps after nginx retried it on the other replica), a clear 5xx, or, for a stream cut
short, an SSE error event. None may hang, end truncated or break the connection. The counts go to
stdout as JSON (and --out); the client retries once what it was told to retry.

Exit 0: passed; 1: failed; 77: skipped (no nginx, njs, redis-server, or nexus binary)."""
import argparse
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")


def skip(why):
    print(f"cluster_fault: SKIPPED: {why}")
    sys.exit(77)


def free_base_port():
    """A base port whose cluster ports (base..base+2, +100, +101) are all free."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        ok = True
        for p in (base, base + 1, base + 2, base + 100, base + 101):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free ports")


def one_request(port, stream, timeout, max_tokens):
    """Sends one completion through nginx; returns (outcome, upstreams, detail)."""
    body = {"prompt": "The", "max_tokens": max_tokens, "temperature": 0.8, "stream": stream}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        upstream = r.getheader("X-Nexus-Upstream", "")
        if r.status >= 500:
            err = json.loads(r.read() or b"{}")
            return ("http_5xx" if "error" in err else "unclear_5xx"), upstream, r.status
        if r.status != 200:
            return "unexpected_status", upstream, r.status
        if not stream:
            out = json.loads(r.read())
            ok = out["choices"][0]["finish_reason"] in ("length", "stop")
            return ("ok" if ok else "bad_body"), upstream, None
        saw_error = False
        while True:
            line = r.readline()
            if not line:
                return "truncated", upstream, None  # no [DONE]: a silent cut
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                return ("stream_error_event" if saw_error else "ok"), upstream, None
            event = json.loads(data)
            if "error" in event:
                saw_error = True
    except socket.timeout:
        return "hang", "", None
    except (ConnectionError, http.client.HTTPException, json.JSONDecodeError) as e:
        return "transport_error", "", repr(e)
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nexus", default=os.path.join(ROOT, "build", "nexus"))
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a request is a hang")
    ap.add_argument("--out", help="write the counts here as JSON")
    args = ap.parse_args()
    for tool in ("nginx", "redis-server", "curl"):
        if shutil.which(tool) is None:
            skip(f"needs {tool} (make deps)")
    if not os.path.exists("/usr/lib/nginx/modules/ngx_http_js_module.so"):
        skip("needs nginx's njs module (libnginx-mod-http-js; make deps)")
    if not os.access(args.nexus, os.X_OK):
        skip(f"no nexus binary at {args.nexus}")

    work = tempfile.mkdtemp(prefix="nexus_cluster_")
    model = os.path.join(work, "model.gguf")
    # A random-weight 15M model: each request takes long enough (~0.5 s) to be in flight at the kill.
    subprocess.run([args.nexus, "gen-model", "--shape", "L15M", "--type", "q8_0", "-o", model,
                    "-q"], check=True)
    base = free_base_port()
    cdir = os.path.join(work, "cluster")
    env = dict(os.environ, NEXUS=args.nexus)

    def cluster(*a):
        return subprocess.run([CLUSTER, *a, "--dir", cdir], env=env, capture_output=True,
                              text=True)

    r = cluster("start", "-m", model, "-n", "2", "--port", str(base), "-t", "1", "--no-prometheus")
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        cluster("stop")
        return 1
    failures = []
    counts = {}
    first_attempt = {}
    lock = threading.Lock()
    issued = [0]
    done = [0]
    upstream_after_restart = set()
    restarted = threading.Event()
    killed_port = f"127.0.0.1:{base + 1}"

    def worker(wid):
        while True:
            with lock:
                if issued[0] >= args.requests:
                    return
                i = issued[0]
                issued[0] += 1
            stream = i % 3 != 2  # two streams for each plain request
            outcome, upstream, detail = one_request(base, stream, args.timeout, args.max_tokens)
            if outcome == "ok" and "," in upstream:
                outcome = "ok_retried"  # nginx sent it to a second replica
            final = outcome
            if outcome in ("http_5xx", "stream_error_event"):
                final, _, _ = one_request(base, stream, args.timeout, args.max_tokens)  # the client's retry
                final = "recovered" if final == "ok" else "failed_after_retry"
            with lock:
                first_attempt[outcome] = first_attempt.get(outcome, 0) + 1
                counts[final] = counts.get(final, 0) + 1
                done[0] += 1
                if restarted.is_set():
                    upstream_after_restart.update(u.strip() for u in upstream.split(","))
                if final not in ("ok", "ok_retried", "recovered"):
                    failures.append((i, stream, outcome, final, upstream, detail))

    def running_on_replica_1():
        try:
            c = http.client.HTTPConnection("127.0.0.1", base + 1, timeout=2)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            for line in text.splitlines():
                if line.startswith("nexus_running_sequences "):
                    return float(line.split()[1])
        except OSError:
            pass
        return 0

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    # The fault: once a sixth of the load is done and replica 1 is generating, kill it; restart it
    # two seconds later.
    while (done[0] < args.requests // 6 or running_on_replica_1() < 1) and done[0] < args.requests:
        time.sleep(0.02)
    kill = cluster("kill-replica", "1")
    t_kill = time.time()
    time.sleep(2)
    start = cluster("start-replica", "1")
    for _ in range(300):  # healthy again, and back in nginx's upstream (the health loop)
        with open(os.path.join(cdir, "upstream.conf")) as f:
            if f"127.0.0.1:{base + 1} max_fails" in f.read():
                break
        time.sleep(0.1)
    t_back = time.time()
    restarted.set()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    stop = cluster("stop")

    total = sum(first_attempt.values())
    good_first = first_attempt.get("ok", 0) + first_attempt.get("ok_retried", 0)
    summary = {
        "requests": total,
        "clients": args.clients,
        "seconds": round(elapsed, 2),
        "first_attempt": first_attempt,
        "after_client_retry": counts,
        "availability_first_attempt": round(good_first / max(total, 1), 4),
        "availability_after_retry": round(
            (counts.get("ok", 0) + counts.get("ok_retried", 0) + counts.get("recovered", 0)) /
            max(total, 1), 4),
        "replica_down_seconds": round(t_back - t_kill, 2),
        "killed_replica_served_after_restart": killed_port in upstream_after_restart,
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            json.dump(summary, f, indent=2)
        os.replace(args.out + ".tmp", args.out)

    errors = []
    if kill.returncode != 0 or start.returncode != 0 or stop.returncode != 0:
        errors.append(f"cluster.sh failed: {kill.stderr}{start.stderr}{stop.stderr}")
    if total != args.requests:
        errors.append(f"{args.requests - total} requests unaccounted for")
    for bad in ("hang", "truncated", "transport_error", "unclear_5xx", "unexpected_status",
                "bad_body"):
        if first_attempt.get(bad):
            errors.append(f"{first_attempt[bad]} requests ended as '{bad}'")
    if counts.get("failed_after_retry"):
        errors.append(f"{counts['failed_after_retry']} requests failed again when retried")
    interrupted = sum(first_attempt.get(k, 0)
                      for k in ("ok_retried", "http_5xx", "stream_error_event"))
    if interrupted == 0:
        errors.append("the kill interrupted no request: the test did not test anything")
    if not summary["killed_replica_served_after_restart"]:
        errors.append("the restarted replica got no requests")
    leftover = subprocess.run(["pgrep", "-f", cdir], capture_output=True, text=True).stdout
    if leftover.strip():
        errors.append(f"processes left after stop: {leftover.strip()}")
    for f in failures[:10]:
        print("failure:", f, file=sys.stderr)
    for e in errors:
        print("cluster_fault: FAILED:", e, file=sys.stderr)
    if errors:
        print(f"(logs kept in {cdir}/logs)", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("cluster_fault: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
