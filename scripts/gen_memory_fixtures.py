#!/usr/bin/python3
"""Golden outputs and gradients of the compressive memory op (src/backends/api/memory.h:
Infini-attention's long-term memory), from PyTorch autograd in float64, for
tests/parity/memory_golden_test.cc.

    /usr/bin/python3 scripts/gen_memory_fixtures.py   # writes tests/fixtures/memory/infini.json

The math (transcribed here from Munkhdalai et al., "Leave No Context Behind: Efficient Infinite
Context Transformers with Infini-attention", 2024, eqs. 3-5, delta-rule variant), per sequence and
key/value head g read by query heads h with g = h // (heads // kv_heads), phi(x) = elu(x) + 1:
    M = 0 [d x d], z = 0 [d]; for each segment of `segment` tokens (the last may be shorter):
        y[i, h] = phi(q[i, h]) M / (phi(q[i, h]) . z + eps)            (the memory before it)
        M = M + sum_i phi(k[i, g])^T (v[i, g] - phi(k[i, g]) M / (phi(k[i, g]) . z + eps))
        z = z + sum_i phi(k[i, g])
with eps = 1e-6. The gradients are d(sum(y * dy)) for a fixed random dy.
"""
import json
import os

import torch

torch.manual_seed(11)
EPS = 1e-6


def phi(x):
    return torch.nn.functional.elu(x) + 1.0


def memory(q, k, v, b, t, segment, heads, kv_heads, d):
    q = q.view(b, t, heads, d)
    k = k.view(b, t, kv_heads, d)
    v = v.view(b, t, kv_heads, d)
    group = heads // kv_heads
    ys = []
    for s in range(b):
        rows = []
        mem = [torch.zeros(d, d, dtype=torch.float64) for _ in range(kv_heads)]
        zs = [torch.zeros(d, dtype=torch.float64) for _ in range(kv_heads)]
        for i0 in range(0, t, segment):
            i1 = min(t, i0 + segment)
            out = []
            for h in range(heads):
                g = h // group
                f = phi(q[s, i0:i1, h])                       # [S, d]
                out.append((f @ mem[g]) / (f @ zs[g] + EPS)[:, None])
            rows.append(torch.stack(out, dim=1))
            for g in range(kv_heads):
                f = phi(k[s, i0:i1, g])
                r = (f @ mem[g]) / (f @ zs[g] + EPS)[:, None]
                mem[g] = mem[g] + f.T @ (v[s, i0:i1, g] - r)
                zs[g] = zs[g] + f.sum(0)
        ys.append(torch.cat(rows, dim=0))
    return torch.stack(ys).reshape(b * t, heads * d)


def case(b, t, segment, heads, kv_heads, d):
    q = torch.randn(b * t, heads * d, dtype=torch.float64, requires_grad=True)
    k = torch.randn(b * t, kv_heads * d, dtype=torch.float64, requires_grad=True)
    v = torch.randn(b * t, kv_heads * d, dtype=torch.float64, requires_grad=True)
    y = memory(q, k, v, b, t, segment, heads, kv_heads, d)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    # (one segment only: the keys and values are written but never read, so no gradient)
    flat = lambda x, like=None: [float(a) for a in (x if x is not None else torch.zeros_like(like))
                                 .detach().reshape(-1)]
    return {"b": b, "t": t, "segment": segment, "heads": heads, "kv_heads": kv_heads, "head_dim": d,
            "q": flat(q), "k": flat(k), "v": flat(v), "dy": flat(dy), "y": flat(y),
            "dq": flat(q.grad, q), "dk": flat(k.grad, k), "dv": flat(v.grad, v)}


cases = [case(2, 10, 4, 4, 2, 3), case(1, 9, 3, 2, 2, 5), case(1, 7, 8, 3, 1, 4)]
path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "memory", "infini.json")
with open(path, "w") as out:
    json.dump(cases, out)
print("wrote", os.path.normpath(path))
