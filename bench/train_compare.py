#!/usr/bin/env python3
"""Training throughput side by side: `nexus train` against the PyTorch peer (../shared/tools/
torch-baseline/bench_train.py) on the same model shape, batch and sequence, alternating round by
round (nexus, PyTorch, nexus, PyTorch, ...) so machine noise hits both, then one markdown table:
tokens/s, ratio, peak RSS of each process, nexus's GFLOP/s and MFU against the FMA peak (and,
with --grad-checkpoint in --nexus-args, HFU: the recomputed forward counted too).

usage: bench/train_compare.py [--model l15m|gpt2] [-r ROUNDS] [--steps N] [--torch-steps N]
                              [-t THREADS] [--nexus-args "--precision bf16 ..."]
                              [--fmapeak build/nexus_fmapeak] [--out DIR]

nexus's tokens/s is tokens per step / the median step time of steps 2..N (elapsed_s in its
metrics JSONL; step 1 pays the page faults); PyTorch's is its own figure (median of its measured
steps after its warm-up). Peak RSS: the process's own maximum resident set (os.wait4) for nexus,
the peer's own report for PyTorch. GFLOP/s = tokens/s x FLOPs per token (6N plus attention, as
docs/PERFORMANCE.md counts them); MFU is that against the FMA peak when --fmapeak is given:
`nexus_fmapeak -t THREADS`'s mean, read before every round and after the last, the highest of
those readings (a single reading moved between 123 and 179 GFLOP/s on the noisy host, and a low
one inflates MFU; the highest is what the cores can do, so the MFU is the conservative one). Both
engines run fp32 AdamW without gradient clipping (the peer's defaults); --nexus-args adds flags
to nexus only (a mode to compare against the peer's fp32). The peer needs Debian's python3-torch
and libopenblas0-openmp (its README).
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Shapes of the training benchmarks: nexus flags, the peer's preset, tokens per step and
# FLOPs per token (6N + the attention's 12 L T d over a sequence: L15M 96.5 MFLOP, GPT-2 774), and
# what --grad-checkpoint adds a token: the recomputed forward of every block without its down
# projection (2 x the q/k/v, output and up (gate) weights) and the attention's forward, 4 L T d
# (L15M 2 x 4.64 M + 1.77 M = 11.06 MFLOP, GPT-2 2 x 56.6 M + 9.4 M = 122.7).
MODELS = {
    "l15m": {
        "nexus": ["--shape", "288,6,6,6,768,32000", "--tokenizer",
                  "{shared}/vocab/ggml-vocab-llama-spm.gguf", "--batch", "8", "--seq", "256"],
        "torch": ["--preset", "llama15m", "--batch", "8", "--seq", "256"],
        "tokens": 8 * 256, "flops": 96.5e6, "recompute_flops": 11.06e6, "steps": 7,
        "torch_steps": 5,
    },
    "gpt2": {
        "nexus": ["--arch", "gpt2", "--shape", "768,12,12,12,3072,50257", "--tokenizer",
                  "{shared}/vocab/ggml-vocab-gpt-2.gguf", "--batch", "4", "--seq", "256"],
        "torch": ["--preset", "gpt2-124m", "--batch", "4", "--seq", "256"],
        "tokens": 4 * 256, "flops": 774e6, "recompute_flops": 122.7e6, "steps": 6,
        "torch_steps": 4,
    },
}


def die(msg, code=2):
    print(f"train_compare.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def run(cmd, log_path, env=None):
    """Runs cmd with stdout and stderr to log_path; returns (exit status, peak RSS in MiB)."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024.0


def tail(path, lines=8):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def nexus_round(args, model, out, index):
    metrics = os.path.join(out, f"nexus-{index}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    shape = [a.format(shared=args.shared) for a in model["nexus"]]
    cmd = [args.nexus, "train", *shape, "--data", f"{args.shared}/data/tinyshakespeare.txt",
           "--steps", str(args.steps), "-t", str(args.threads), "--clip", "0",
           "-o", os.path.join(out, f"nexus-{index}.gguf"), "--metrics", metrics,
           *shlex.split(args.nexus_args)]
    log = os.path.join(out, f"nexus-{index}.log")
    code, rss = run(cmd, log)
    if code != 0:
        die(f"nexus train failed (exit {code}); the end of {log}:\n{tail(log)}", 1)
    times = []
    with open(metrics) as f:
        for line in f:
            row = json.loads(line)
            if "elapsed_s" in row:
                times.append(row["elapsed_s"])
    steps = [b - a for a, b in zip(times, times[1:])]  # steps 2..N
    if not steps:
        die(f"{metrics} has fewer than two steps: use --steps 3 or more", 1)
    return model["tokens"] / statistics.median(steps), rss


def torch_round(args, model, out, index):
    result = os.path.join(out, f"torch-{index}.jsonl")
    cmd = [args.torch_python, os.path.join(args.torch_dir, "bench_train.py"), *model["torch"],
           "--mode", "fp32", "--warmup", "2", "--steps", str(args.torch_steps),
           "--threads", str(args.threads), "--out", result]
    env = dict(os.environ, LD_LIBRARY_PATH=args.blas_dir)
    log = os.path.join(out, f"torch-{index}.log")
    code, _ = run(cmd, log, env)
    if code != 0 or not os.path.exists(result):
        die(f"the PyTorch peer failed (exit {code}); the end of {log}:\n{tail(log)}", 1)
    with open(result) as f:
        row = json.loads(f.readlines()[-1])
    if row.get("status") != "ok":
        die(f"the PyTorch peer reported status {row.get('status')!r} in {result}", 1)
    return row["tokens_per_s"], row["peak_rss_mib"]


def fma_peak(path, threads):
    text = subprocess.run([path, "-t", str(threads)], capture_output=True, text=True,
                          check=True).stdout
    match = re.search(r"([0-9.]+) mean", text)
    if match is None:
        die(f"could not read the mean peak from {path}'s output: {text.strip()!r}")
    return float(match.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="l15m")
    p.add_argument("-r", "--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, help="nexus steps per round (default 7 L15M, 6 GPT-2)")
    p.add_argument("--torch-steps", type=int, help="the peer's measured steps (5 L15M, 4 GPT-2)")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--nexus-args", default="", help="extra flags for nexus train only")
    p.add_argument("--nexus", default=os.path.join(ROOT, "build", "nexus"))
    p.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    p.add_argument("--torch-dir", help="default: SHARED/tools/torch-baseline")
    p.add_argument("--torch-python", default="/usr/bin/python3",
                   help="a python with torch (default: Debian's, as the peer's README says)")
    p.add_argument("--blas-dir", default="/usr/lib/x86_64-linux-gnu/openblas-openmp",
                   help="the OpenBLAS the peer loads (LD_LIBRARY_PATH)")
    p.add_argument("--fmapeak", help="a nexus_fmapeak binary: adds GFLOP/s' MFU column")
    p.add_argument("--out", help="directory for the raw logs (default: a new temporary one)")
    args = p.parse_args()

    model = MODELS[args.model]
    args.steps = args.steps or model["steps"]
    args.torch_steps = args.torch_steps or model["torch_steps"]
    args.torch_dir = args.torch_dir or os.path.join(args.shared, "tools", "torch-baseline")
    if args.rounds < 1 or args.threads < 1 or args.steps < 3 or args.torch_steps < 1:
        die("--rounds, -t and --torch-steps must be at least 1, --steps at least 3")
    if not os.access(args.nexus, os.X_OK):
        die(f"nexus binary '{args.nexus}' not found (build it, or pass --nexus PATH)")
    if not os.path.isfile(os.path.join(args.shared, "data", "tinyshakespeare.txt")):
        die(f"'{args.shared}' has no data/tinyshakespeare.txt (pass --shared DIR)")
    if not os.path.isfile(os.path.join(args.torch_dir, "bench_train.py")):
        die(f"no bench_train.py in '{args.torch_dir}' (pass --torch-dir DIR)")
    probe = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        die(f"{args.torch_python} cannot import torch: apt-get install python3-torch "
            "python3-numpy libopenblas0-openmp")
    if not os.path.isdir(args.blas_dir):
        die(f"{args.blas_dir} is missing: apt-get install libopenblas0-openmp (without it torch "
            "falls back to the reference BLAS, an unfair peer)")
    out = args.out or tempfile.mkdtemp(prefix="nexus-train-compare.")
    os.makedirs(out, exist_ok=True)

    readings = []
    rows = []
    for i in range(1, args.rounds + 1):
        if args.fmapeak:
            readings.append(fma_peak(args.fmapeak, args.threads))
        print(f"train_compare.py: round {i}/{args.rounds}: nexus", file=sys.stderr)
        n_tps, n_rss = nexus_round(args, model, out, i)
        print(f"train_compare.py: round {i}/{args.rounds}: PyTorch", file=sys.stderr)
        t_tps, t_rss = torch_round(args, model, out, i)
        rows.append((n_tps, t_tps, n_rss, t_rss))
    if args.fmapeak:
        readings.append(fma_peak(args.fmapeak, args.threads))
    peak = max(readings) if readings else None

    extra = f" {args.nexus_args}" if args.nexus_args else ""
    print(f"\n{args.model}, {model['tokens']} tokens a step, {args.threads} threads, nexus"
          f"{extra} against PyTorch fp32"
          + (f"; FMA peak {peak:.1f} GFLOP/s (the highest of {len(readings)} readings: "
             + ", ".join(f"{r:.1f}" for r in readings) + ")" if peak else "") + "\n")
    # With checkpointing the cores also run the recompute: HFU counts it, MFU does not.
    hfu = bool(peak) and "--grad-checkpoint" in shlex.split(args.nexus_args)
    head = "| round | nexus tokens/s | PyTorch tokens/s | ratio | nexus peak RSS MiB | " \
           "PyTorch peak RSS MiB | RSS share | nexus GFLOP/s |"
    print(head + (" MFU |" if peak else "") + (" HFU (with the recompute) |" if hfu else ""))
    print("|---" * (8 + bool(peak) + hfu) + "|")
    for i, (n_tps, t_tps, n_rss, t_rss) in enumerate(rows, 1):
        gflops = n_tps * model["flops"] / 1e9
        line = (f"| {i} | {n_tps:,.0f} | {t_tps:,.0f} | {n_tps / t_tps:.2f}x | {n_rss:,.0f} | "
                f"{t_rss:,.0f} | {100 * n_rss / t_rss:.1f}% | {gflops:.0f} |")
        line += f" {100 * gflops / peak:.1f}% |" if peak else ""
        if hfu:
            hw = n_tps * (model["flops"] + model["recompute_flops"]) / 1e9
            line += f" {100 * hw / peak:.1f}% |"
        print(line)
    ratios = [r[0] / r[1] for r in rows]
    print(f"\nratio: median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, "
          f"max {max(ratios):.2f}); raw logs: {out}")


if __name__ == "__main__":
    main()
