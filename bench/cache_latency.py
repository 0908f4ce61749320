#!/usr/bin/env python3
"""Response-cache latency on a running cluster (scripts/cluster.sh with Redis): for N distinct
greedy completions, the time of the first call on replica 1 (a miss: generated, then stored in
memory and Redis), the same call again on replica 1 (a memory hit), and on replica 2 (a Redis hit,
then copied into its memory); through nginx, a call to a new prompt and the same again. Also the
Redis round trip the replicas measured (/metrics). Prints a JSON summary."""
import argparse
import http.client
import json
import statistics
import time


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    dt = time.perf_counter() - t0
    tier = r.getheader("X-Nexus-Cache", "")
    c.close()
    if r.status != 200:
        raise SystemExit(f"cache_latency: HTTP {r.status} from port {port}")
    return dt, tier


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True, help="the cluster's nginx port")
    ap.add_argument("-n", type=int, default=40, help="distinct prompts")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    r1, r2 = args.port + 1, args.port + 2
    times = {"miss": [], "memory": [], "redis": [], "nginx_miss": [], "nginx_hit": []}
    for i in range(args.n):
        body = {"prompt": f"Once upon a time {i} there was", "max_tokens": args.max_tokens,
                "temperature": 0, "bench": "cache_latency", "run": time.time()}
        for port, want, key in ((r1, "miss", "miss"), (r1, "memory", "memory"),
                                (r2, "redis", "redis")):
            dt, tier = post(port, body)
            if tier != want:
                raise SystemExit(f"cache_latency: expected {want}, got {tier!r}")
            times[key].append(dt)
        body["through"] = "nginx"
        dt, tier = post(args.port, body)
        times["nginx_miss"].append(dt)
        dt, tier = post(args.port, body)
        if tier not in ("memory", "redis"):
            raise SystemExit(f"cache_latency: a repeat through nginx was a {tier!r}")
        times["nginx_hit"].append(dt)
    out = {k: {"p50_ms": round(1e3 * statistics.median(v), 3),
               "mean_ms": round(1e3 * statistics.fmean(v), 3)} for k, v in times.items()}
    rtt = []
    for port in (r1, r2):
        n = metric(port, "nexus_cache_redis_commands_total")
        s = metric(port, "nexus_cache_redis_seconds_total")
        if n:
            rtt.append(1e3 * s / n)
    out["redis_round_trip_ms"] = round(statistics.fmean(rtt), 4) if rtt else None
    out["prompts"] = args.n
    out["max_tokens"] = args.max_tokens
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
