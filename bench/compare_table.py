#!/usr/bin/env python3
"""Merges the JSON of bench/compare.sh's runs into one markdown table (standard library only).

Input: a manifest of lines "MODEL<TAB>NEXUS_JSON<TAB>PEER_JSON[<TAB>READ_GBPS]"; each JSON file is
the array that `nexus bench -o json` or `llama-bench -o json` printed for one test (pp or tg). A
line's READ_GBPS (compare.sh --membw: the bandwidth measured around that test) sets its bound in
place of the one given on the command line, and the table then shows it.
"""
import json
import os
import sys


def load_test(path):
    """The single pp/tg object of a bench JSON file (the first when there are several)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path}: expected a non-empty JSON array")
    return data[0]


def test_name(r):
    name = f"pp{r['n_prompt']}" if r.get("n_prompt", 0) > 0 else f"tg{r['n_gen']}"
    depth = r.get("n_depth", 0) or 0
    return f"{name} @ d{depth}" if depth > 0 else name


def test_key(r):
    return (r.get("n_prompt"), r.get("n_gen"), r.get("n_depth", 0) or 0)


def ts(r):
    return f"{r['avg_ts']:.2f} ± {r.get('stddev_ts', 0.0):.2f}"


def main(manifest, bandwidth_gbps=0.0):
    rows = []
    per_row_bw = False
    nexus_build = peer_build = cpu = ""
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) not in (3, 4):
                raise ValueError(f"{manifest}: expected 3 or 4 tab-separated fields: {line!r}")
            model, nexus_path, peer_path = fields[:3]
            row_bw = float(fields[3]) if len(fields) == 4 else bandwidth_gbps
            per_row_bw = per_row_bw or len(fields) == 4
            n, p = load_test(nexus_path), load_test(peer_path)
            if test_key(n) != test_key(p):
                raise ValueError(f"{peer_path}: test {test_name(p)} does not match {test_name(n)}")
            ratio = n["avg_ts"] / p["avg_ts"] if p.get("avg_ts") else float("nan")
            bound = ""
            frac_n = frac_p = ""
            bpt = n.get("bytes_per_token", 0)
            if row_bw > 0 and n.get("n_gen", 0) > 0 and bpt:
                b = row_bw * 1e9 / bpt
                bound = f"{b:.1f}"
                frac_n = f"{100 * n['avg_ts'] / b:.0f}%"
                frac_p = f"{100 * p['avg_ts'] / b:.0f}%"
            rss = n.get("peak_rss_bytes", 0) / 2**20
            rows.append([os.path.basename(model), n.get("model_type", ""), test_name(n),
                         ts(n), ts(p), f"{ratio:.2f}", f"{row_bw:.1f}" if row_bw > 0 else "",
                         bound, frac_n, frac_p, f"{rss:.0f}"])
            nexus_build = n.get("build_commit", "")
            peer_build = f"{p.get('build_commit', '')} ({p.get('build_number', '?')})"
            cpu = n.get("cpu_info", "")
    head = ["model", "type", "test", "nexus t/s", "llama.cpp t/s", "ratio", "read GB/s",
            "bound t/s", "nexus % bound", "llama.cpp % bound", "nexus peak RSS MiB"]
    if not per_row_bw:  # one bandwidth for the whole table: said once, below it
        head.pop(6)
        for r in rows:
            r.pop(6)
    widths = [max(len(head[c]), *(len(r[c]) for r in rows)) for c in range(len(head))]
    right = set(range(3, len(head)))

    def fmt(cells):
        return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    print(fmt(head))
    print("| " + " | ".join("-" * (w - 1) + ":" if i in right else "-" * w
                            for i, w in enumerate(widths)) + " |")
    for r in rows:
        print(fmt(r))
    note = f"; bound at {bandwidth_gbps:g} GB/s" if bandwidth_gbps > 0 and not per_row_bw else ""
    print(f"\nnexus {nexus_build}, llama.cpp {peer_build}, cpu: {cpu}; ratio = nexus / llama.cpp"
          + note)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: compare_table.py MANIFEST.tsv [BANDWIDTH_GBPS]")
    try:
        main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) == 3 else 0.0)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"compare_table.py: error: {e}")
