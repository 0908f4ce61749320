#!/usr/bin/python3
"""Golden outputs and gradients of the long-term memory ops (src/backends/api/memory.h:
Infini-attention's compressive memory and Titans' linear memory), from PyTorch autograd in float64,
for tests/parity/memory_golden_test.cc.

    /usr/bin/python3 scripts/gen_memory_fixtures.py
    # writes tests/fixtures/memory/infini.json, titans.json and titans_mlp.json

The math (transcribed here from Munkhdalai et al., "Leave No Context Behind: Efficient Infinite
Context Transformers with Infini-attention", 2024, eqs. 3-5, delta-rule variant), per sequence and
key/value head g read by query heads h with g = h // (heads // kv_heads), phi(x) = elu(x) + 1:
    M = 0 [d x d], z = 0 [d]; for each segment of `segment` tokens (the last may be shorter):
        y[i, h] = phi(q[i, h]) M / (phi(q[i, h]) . z + eps)            (the memory before it)
        M = M + sum_i phi(k[i, g])^T (v[i, g] - phi(k[i, g]) M / (phi(k[i, g]) . z + eps))
        z = z + sum_i phi(k[i, g])
with eps = 1e-6. The gradients are d(sum(y * dy)) for a fixed random dy.

Titans (Behrouz, Zhong and Mirrokni, "Titans: Learning to Memorize at Test Time", 2024, eqs.
8-14, the memory a single linear layer, L_M = 1, updated once a segment), per sequence and
key/value head g with unit vectors x^ = x / sqrt(|x|^2 + 1e-6) and M = S = 0:
    for each segment:  y[i, h] = q^[i, h] M                     (the memory before it)
        G = 2 sum_i k^_i^T (k^_i M - v_i);  S = eta_g S - theta_g G;  M = (1 - alpha_g) M + S
eta, theta, alpha per key/value head in (0, 1); their gradients are checked too.

Titans' deep memory (the same paper, L_M = 2): per key/value head an MLP
M(x) = silu(x W1) W2 from learned initial weights W1_0 [d x hidden], W2_0 [hidden x d], S = 0:
    for each segment:  y[i, h] = M(q^[i, h])                    (the memory before it)
        L = sum_i |M(k^_i) - v_i|^2;  G_j = dL/dW_j (autograd, kept in the graph: the outer
        gradient goes through the inner one)
        S_j = eta_g S_j - theta_g G_j;  W_j = W_j0 + (1 - alpha_g) (W_j - W_j0) + S_j
(forgetting decays toward the initial weights; src/backends/api/memory.h says why). The gradients
of q, k, v, the rates and W1_0, W2_0 are checked.
"""
import json
import os

import torch

torch.manual_seed(11)
EPS = 1e-6
CLAMP = 8.0  # kTitansGradClamp: the deep memory's soft gradient clamp


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


def unit(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + EPS)


def titans(q, k, v, eta, theta, alpha, b, t, segment, heads, kv_heads, d):
    q = unit(q.view(b, t, heads, d))
    k = unit(k.view(b, t, kv_heads, d))
    v = v.view(b, t, kv_heads, d)
    group = heads // kv_heads
    ys = []
    for s in range(b):
        rows = []
        mem = [torch.zeros(d, d, dtype=torch.float64) for _ in range(kv_heads)]
        mom = [torch.zeros(d, d, dtype=torch.float64) for _ in range(kv_heads)]
        for i0 in range(0, t, segment):
            i1 = min(t, i0 + segment)
            rows.append(torch.stack([q[s, i0:i1, h] @ mem[h // group] for h in range(heads)], 1))
            for g in range(kv_heads):
                kg = k[s, i0:i1, g]
                grad = 2.0 / (i1 - i0) * kg.T @ (kg @ mem[g] - v[s, i0:i1, g])
                mom[g] = eta[g] * mom[g] - theta[g] * grad
                mem[g] = (1.0 - alpha[g]) * mem[g] + mom[g]
        ys.append(torch.cat(rows, dim=0))
    return torch.stack(ys).reshape(b * t, heads * d)


def titans_case(b, t, segment, heads, kv_heads, d):
    q = torch.randn(b * t, heads * d, dtype=torch.float64, requires_grad=True)
    k = torch.randn(b * t, kv_heads * d, dtype=torch.float64, requires_grad=True)
    v = torch.randn(b * t, kv_heads * d, dtype=torch.float64, requires_grad=True)
    rate = lambda lo, hi: (lo + (hi - lo) * torch.rand(kv_heads, dtype=torch.float64)).requires_grad_()
    eta, theta, alpha = rate(0.5, 0.95), rate(0.3, 0.9), rate(0.01, 0.2)
    y = titans(q, k, v, eta, theta, alpha, b, t, segment, heads, kv_heads, d)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    flat = lambda x, like=None: [float(a) for a in (x if x is not None else torch.zeros_like(like))
                                 .detach().reshape(-1)]
    return {"b": b, "t": t, "segment": segment, "heads": heads, "kv_heads": kv_heads, "head_dim": d,
            "q": flat(q), "k": flat(k), "v": flat(v), "dy": flat(dy), "y": flat(y),
            "eta": flat(eta), "theta": flat(theta), "alpha": flat(alpha),
            "dq": flat(q.grad, q), "dk": flat(k.grad, k), "dv": flat(v.grad, v),
            "deta": flat(eta.grad, eta), "dtheta": flat(theta.grad, theta),
            "dalpha": flat(alpha.grad, alpha)}


def titans_mlp(q, k, v, eta, theta, alpha, w10, w20, b, t, segment, heads, kv_heads, d):
    q = unit(q.view(b, t, heads, d))
    k = unit(k.view(b, t, kv_heads, d))
    v = v.view(b, t, kv_heads, d)
    group = heads // kv_heads
    silu = torch.nn.functional.silu
    ys = []
    for s in range(b):
        rows = []
        w = [[w10[g], w20[g]] for g in range(kv_heads)]
        mom = [[torch.zeros_like(w10[g]), torch.zeros_like(w20[g])] for g in range(kv_heads)]
        for i0 in range(0, t, segment):
            i1 = min(t, i0 + segment)
            rows.append(torch.stack([silu(q[s, i0:i1, h] @ w[h // group][0]) @ w[h // group][1]
                                     for h in range(heads)], 1))
            for g in range(kv_heads):
                kg = k[s, i0:i1, g]
                loss = ((silu(kg @ w[g][0]) @ w[g][1] - v[s, i0:i1, g]) ** 2).sum() / (i1 - i0)
                grads = torch.autograd.grad(loss, w[g], create_graph=True)
                # the soft clamp: both gradients scaled by tau tanh(n / tau) / n, n their joint norm
                n = torch.sqrt(sum((x * x).sum() for x in grads))
                grads = [x * (CLAMP * torch.tanh(n / CLAMP) / n) for x in grads]
                for j, init in enumerate((w10[g], w20[g])):
                    mom[g][j] = eta[g] * mom[g][j] - theta[g] * grads[j]
                    w[g][j] = init + (1.0 - alpha[g]) * (w[g][j] - init) + mom[g][j]
        ys.append(torch.cat(rows, dim=0))
    return torch.stack(ys).reshape(b * t, heads * d)


def titans_mlp_case(b, t, segment, heads, kv_heads, d, hidden, v_scale=1.0):
    q = torch.randn(b * t, heads * d, dtype=torch.float64, requires_grad=True)
    k = torch.randn(b * t, kv_heads * d, dtype=torch.float64, requires_grad=True)
    v = (v_scale * torch.randn(b * t, kv_heads * d, dtype=torch.float64)).requires_grad_()
    rate = lambda lo, hi: (lo + (hi - lo) * torch.rand(kv_heads, dtype=torch.float64)).requires_grad_()
    eta, theta, alpha = rate(0.5, 0.95), rate(0.3, 0.9), rate(0.01, 0.2)
    w10 = torch.randn(kv_heads, d, hidden, dtype=torch.float64).requires_grad_()
    w20 = (torch.randn(kv_heads, hidden, d, dtype=torch.float64) / hidden ** 0.5).requires_grad_()
    y = titans_mlp(q, k, v, eta, theta, alpha, w10, w20, b, t, segment, heads, kv_heads, d)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    flat = lambda x, like=None: [float(a) for a in (x if x is not None else torch.zeros_like(like))
                                 .detach().reshape(-1)]
    return {"b": b, "t": t, "segment": segment, "heads": heads, "kv_heads": kv_heads, "head_dim": d,
            "hidden": hidden, "q": flat(q), "k": flat(k), "v": flat(v), "dy": flat(dy),
            "y": flat(y), "eta": flat(eta), "theta": flat(theta), "alpha": flat(alpha),
            "w1": flat(w10), "w2": flat(w20), "dq": flat(q.grad, q), "dk": flat(k.grad, k),
            "dv": flat(v.grad, v), "deta": flat(eta.grad, eta), "dtheta": flat(theta.grad, theta),
            "dalpha": flat(alpha.grad, alpha), "dw1": flat(w10.grad, w10),
            "dw2": flat(w20.grad, w20)}


here = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "memory")
for name, cases in [
        ("infini.json", [case(2, 10, 4, 4, 2, 3), case(1, 9, 3, 2, 2, 5), case(1, 7, 8, 3, 1, 4)]),
        ("titans.json", [titans_case(2, 13, 4, 4, 2, 3), titans_case(1, 9, 3, 2, 2, 5),
                         titans_case(3, 8, 2, 3, 1, 4)]),
        ("titans_mlp.json", [titans_mlp_case(2, 13, 4, 4, 2, 3, 5),
                             titans_mlp_case(1, 9, 3, 2, 2, 5, 4),
                             titans_mlp_case(3, 8, 2, 3, 1, 4, 8),
                             # large values: gradients well past the clamp
                             titans_mlp_case(2, 10, 3, 2, 1, 4, 6, v_scale=20.0)])]:
    path = os.path.join(here, name)
    with open(path, "w") as out:
        json.dump(cases, out)
    print("wrote", os.path.normpath(path))
