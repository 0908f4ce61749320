#!/usr/bin/env python3
"""An alpha-beta model of one training step on N ranks, for data parallel (ZeRO 0/1/2), tensor
parallel and pipeline parallel (docs/DISTRIBUTED.md). Weak scaling: each rank keeps its
micro-batch, so the compute per rank is fixed and the question is what the communication adds.

  compute      T_c = 6 P tokens_per_rank / F                 (forward + backward FLOPs)
  ring collective of S bytes over n ranks: 2 (n - 1) (alpha + S / (n beta)) for an all-reduce,
               half that for a reduce-scatter or an all-gather, paid per bucket for the latency
  data parallel (ZeRO 0): all-reduce of the gradients (4P bytes, f32; --comm-dtype bf16 halves
               the bandwidth term) in buckets, overlapping the backward (2/3 of T_c) at best
  ZeRO 1/2:    reduce-scatter + all-gather: the same bytes, the same time; the memory differs
  tensor parallel (degree t): 4 all-reduces of the activations (b s d, f32) per layer per step
               (2 forward, 2 backward), on the critical path; compute / t
  pipeline (p stages, m micro-batches, 1F1B): bubble (p - 1) / (m + p - 1) of the step; a
               send of b s d floats each way per micro-batch per boundary
  with m micro-batches a step, the compute and tensor parallel's all-reduces are m times those of
  one, data parallel's exchange is once a step
Data parallel and ZeRO are weak scaling (N replicas, each with its micro-batch); tensor and
pipeline parallel split one replica over N ranks (N at most the heads, or the layers: "-" beyond).
Efficiency = ideal step / modelled step. A strategy "stops scaling" where it falls below 0.8.

Usage: bench/scaling_model.py [--alpha-us 5] [--beta-gbs 12.5] [--check-alpha-us 24
       --check-beta-gbs 7.3]   (the check: 2 ranks with this host's measured collectives)
"""
import argparse

MODELS = {
    # params, layers, heads, width, sequence, sequences per rank (data parallel)
    "L15M": dict(P=24.4e6, L=6, H=6, d=288, seq=256, b=4),
    "GPT-2 124M": dict(P=124.4e6, L=12, H=12, d=768, seq=256, b=2),
    "7B": dict(P=6.7e9, L=32, H=32, d=4096, seq=2048, b=1),
}
# Per-rank compute and micro-batches per step: this host's one-thread training GEMMs, one
# micro-batch a step (as measured); an H100-class accelerator at about 40% of its dense bf16 peak,
# 32 micro-batches a step (gradient accumulation, or the pipeline's micro-batches), as such runs do.
COMPUTE = {"this CPU, 150 GFLOP/s a rank, 1 micro-batch a step": (150e9, 1),
           "H100-class, 400 TFLOP/s a rank, 32 micro-batches a step": (400e12, 32)}


def ring(n, nbytes, alpha, beta, buckets=1, factor=2.0):
    """A ring all-reduce (factor 2) or reduce-scatter / all-gather (factor 1)."""
    if n == 1:
        return 0.0
    return factor * (n - 1) * (alpha * buckets + nbytes / (n * beta))


def step(m, n, strategy, alpha, beta, flops, micro=1, bucket=4 << 20):
    tokens = m["b"] * m["seq"] * micro
    t_c = 6 * m["P"] * tokens / flops
    grad_bytes = 4 * m["P"]
    buckets = max(1, round(grad_bytes / bucket))
    if strategy in ("DP", "ZeRO-1/2"):
        comm = ring(n, grad_bytes, alpha, beta, buckets)
        exposed = max(0.0, comm - 2.0 / 3.0 * t_c)
        return t_c, t_c + exposed, comm
    if strategy == "DP bf16":
        comm = ring(n, grad_bytes / 2, alpha, beta, buckets)
        return t_c, t_c + max(0.0, comm - 2.0 / 3.0 * t_c), comm
    if strategy == "TP":
        act = 4 * m["b"] * m["seq"] * m["d"]
        comm = 4 * m["L"] * micro * ring(n, act, alpha, beta)
        return t_c / n, t_c / n + comm, comm
    if strategy == "PP":
        bubble = (n - 1) / (micro + n - 1)
        act = 4 * m["b"] * m["seq"] * m["d"]
        comm = 2 * micro * (alpha + act / beta) if n > 1 else 0.0
        ideal = t_c / n
        return ideal, ideal / (1 - bubble) + comm, comm
    raise ValueError(strategy)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--alpha-us", type=float, default=5.0, help="network latency per hop")
    ap.add_argument("--beta-gbs", type=float, default=12.5, help="link bandwidth, GB/s")
    ap.add_argument("--check-alpha-us", type=float, default=24.0)
    ap.add_argument("--check-beta-gbs", type=float, default=7.3)
    a = ap.parse_args()
    alpha, beta = a.alpha_us * 1e-6, a.beta_gbs * 1e9
    print(f"network: alpha {a.alpha_us} us, beta {a.beta_gbs} GB/s; efficiency (ideal / modelled "
          "step) and [communication ms]")
    strategies = ["DP", "DP bf16", "ZeRO-1/2", "TP", "PP"]
    for cname, (flops, micro) in COMPUTE.items():
        for name, m in MODELS.items():
            print(f"\n{name} ({m['P'] / 1e6:.0f} M parameters, {m['b']} x {m['seq']} tokens a "
                  f"micro-batch), {cname}")
            print("| ranks | " + " | ".join(strategies) + " |")
            print("|---:|" + "---|" * len(strategies))
            for n in (2, 8, 64, 512):
                cells = []
                for s in strategies:
                    if (s == "TP" and n > m["H"]) or (s == "PP" and n > m["L"]):
                        cells.append("-")
                        continue
                    ideal, t, comm = step(m, n, s, alpha, beta, flops, micro)
                    cells.append(f"{ideal / t:.2f} [{comm * 1e3:.1f}]")
                print(f"| {n} | " + " | ".join(cells) + " |")
    print("\nmemory per rank, GB (f32 parameters + gradients + AdamW state):")
    for name, m in MODELS.items():
        print(f"  {name}: " + "; ".join(
            f"N={n}: ZeRO 0 {16 * m['P'] / 1e9:.2f}, 1 {(8 + 8 / n) * m['P'] / 1e9:.2f}, "
            f"2 {(4 + 12 / n) * m['P'] / 1e9:.2f}" for n in (2, 8, 512)))
    # The 2-rank check: this host's collectives, the L15M and GPT-2 steps.
    ca, cb = a.check_alpha_us * 1e-6, a.check_beta_gbs * 1e9
    print("\ncheck, 2 ranks with this host's measured alpha and 4 MiB-bucket bus bandwidth:")
    for name in ("L15M", "GPT-2 124M"):
        m = MODELS[name]
        _, _, comm = step(m, 2, "DP", ca, cb, 150e9)
        print(f"  {name}: all-reduce of {4 * m['P'] / 1e6:.0f} MB modelled at {comm * 1e3:.1f} ms "
              "a step")


if __name__ == "__main__":
    main()
