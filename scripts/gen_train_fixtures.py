#!/usr/bin/python3
"""Golden fixtures for the trainer: a tiny llama (GQA, tied and untied output), a tiny qwen2 (q/k/v
biases, NeoX RoPE, untied output), a tiny qwen3 (per-head q/k RMSNorm, head_dim 16 with dim 32,
tied), a tiny llama with a sliding window of 4 and a tiny gpt2 (learned positions, LayerNorm with bias, fused
QKV with bias, tanh GELU, biases on every linear, tied output), their loss on a fixed batch, every
parameter gradient, and the losses of 20 AdamW steps, computed in float64.

Run with Debian's python (torch + numpy, no network):

    /usr/bin/python3 scripts/gen_train_fixtures.py            # writes tests/fixtures/train/
    /usr/bin/python3 scripts/gen_train_fixtures.py qwen2_untied   # one case

The forward pass is formulation A of gen_model_fixtures.py (imported, not copied), which that
script checks against an independent token-by-token formulation and llama2.c's sample text; here
torch autograd differentiates it. Files per case NAME (both GGUF v3, float32 tensors):
  NAME.gguf       the model (llama.cpp names and metadata), loadable by Model::load
  NAME.ref.gguf   the reference:
                    train.batch, train.seq (u32)     batch shape B x T
                    train.tokens, train.targets      i32 arrays of B*T ids, row-major (b, t)
                    train.loss (f32)                 mean cross-entropy of the initial weights
                    train.losses (f32 array)         loss before each of the 20 AdamW steps
                    train.lr, .beta1, .beta2, .eps, .weight_decay, .clip (f32)
                    grad.<tensor name>               d loss / d tensor, same shape as the tensor
                                                     (tied: token_embd gets both uses)
"""

import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_fixtures as gm  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "train")

CASES = [
    dict(name="llama_tied", arch="llama", n_vocab=64, dim=32, n_heads=4, n_kv_heads=2, ffn_dim=48,
         tied=True, batch=3, seq=8, seed=11),
    dict(name="llama_untied", arch="llama", n_vocab=64, dim=32, n_heads=4, n_kv_heads=2,
         ffn_dim=40, tied=False, rope_base=500000.0, batch=2, seq=12, seed=12),
    dict(name="qwen2_untied", arch="qwen2", n_vocab=64, dim=32, n_heads=4, n_kv_heads=2,
         ffn_dim=40, qkv_bias=True, rope="neox", rope_base=1000000.0, norm_eps=1e-6, tied=False,
         batch=2, seq=10, seed=14),
    dict(name="qwen3_tied", arch="qwen3", n_vocab=64, dim=32, n_heads=4, n_kv_heads=2,
         head_dim=16, ffn_dim=40, qk_norm=True, rope="neox", rope_base=1000000.0, norm_eps=1e-6,
         tied=True, batch=2, seq=9, seed=15),
    dict(name="llama_swa", arch="llama", n_vocab=64, dim=32, n_heads=4, n_kv_heads=2, ffn_dim=40,
         window=4, tied=False, batch=2, seq=11, seed=16),
    dict(name="gpt2_tied", arch="gpt2", n_vocab=64, dim=32, n_heads=4, n_kv_heads=4, ffn_dim=56,
         norm="layer", ffn="gelu", qkv_bias=True, pos_embd=True, rope="none", tied=True, n_ctx=16,
         batch=3, seq=10, seed=13),
]
OPT = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip=1.0, steps=20)


def make_weights(cfg, rng):
    d, hd, f, V = cfg["dim"], cfg["head_dim"], cfg["ffn_dim"], cfg["n_vocab"]
    qd, kvd = cfg["n_heads"] * hd, cfg["n_kv_heads"] * hd
    gpt2 = cfg["arch"] == "gpt2"

    def t(a):  # rounded to float32 once: the GGUF holds exactly these values
        return torch.from_numpy(a.astype(np.float32).astype(np.float64))

    def lin(n_out, n_in, gain=1.0):
        return t(rng.standard_normal((n_out, n_in)) * gain / math.sqrt(n_in))

    def norm_w(n):
        return t(1.0 + 0.1 * rng.standard_normal(n))

    def bias(n):
        return t(0.1 * rng.standard_normal(n))

    w = {"tok_embd": t(rng.standard_normal((V, d)) * 0.5), "layers": []}
    if gpt2:
        w["pos_embd"] = t(rng.standard_normal((cfg["n_ctx"], d)) * 0.3)
    for _ in range(cfg["n_layers"]):
        if gpt2:  # GELU pre-activations spread over its curved range (gain 2.5)
            w["layers"].append(dict(
                attn_norm=norm_w(d), attn_norm_b=bias(d),
                wqkv=torch.cat([lin(qd, d, 1.5), lin(kvd, d, 1.5), lin(kvd, d)]),
                bqkv=bias(qd + 2 * kvd), wo=lin(d, qd), bo=bias(d), ffn_norm=norm_w(d),
                ffn_norm_b=bias(d), w_up=lin(f, d, 2.5), b_up=bias(f), w_down=lin(d, f),
                b_down=bias(d)))
            continue
        L = dict(attn_norm=norm_w(d), wq=lin(qd, d, 1.5), wk=lin(kvd, d, 1.5), wv=lin(kvd, d),
                 wo=lin(d, qd), ffn_norm=norm_w(d), w_gate=lin(f, d), w_up=lin(f, d),
                 w_down=lin(d, f))
        if cfg.get("qkv_bias"):  # qwen2
            L.update(bq=bias(qd), bk=bias(kvd), bv=bias(kvd))
        if cfg.get("qk_norm"):  # qwen3
            L.update(q_norm=norm_w(hd), k_norm=norm_w(hd))
        w["layers"].append(L)
    w["out_norm"] = norm_w(d)
    if gpt2:
        w["out_norm_b"] = bias(d)
    w["output"] = w["tok_embd"] if cfg["tied"] else lin(V, d)
    return w


LLAMA_NAMES = [("attn_norm", "attn_norm.weight"), ("wq", "attn_q.weight"),
               ("wk", "attn_k.weight"), ("wv", "attn_v.weight"), ("wo", "attn_output.weight"),
               ("ffn_norm", "ffn_norm.weight"), ("w_gate", "ffn_gate.weight"),
               ("w_up", "ffn_up.weight"), ("w_down", "ffn_down.weight")]
GPT2_NAMES = [("attn_norm", "attn_norm.weight"), ("attn_norm_b", "attn_norm.bias"),
              ("wqkv", "attn_qkv.weight"), ("bqkv", "attn_qkv.bias"),
              ("wo", "attn_output.weight"), ("bo", "attn_output.bias"),
              ("ffn_norm", "ffn_norm.weight"), ("ffn_norm_b", "ffn_norm.bias"),
              ("w_up", "ffn_up.weight"), ("b_up", "ffn_up.bias"),
              ("w_down", "ffn_down.weight"), ("b_down", "ffn_down.bias")]
QWEN2_BIAS_NAMES = [("bq", "attn_q.bias"), ("bk", "attn_k.bias"), ("bv", "attn_v.bias")]
QWEN3_NORM_NAMES = [("q_norm", "attn_q_norm.weight"), ("k_norm", "attn_k_norm.weight")]


def named_params(cfg, w):
    """(gguf name, tensor) of every distinct parameter, in the GGUF's order."""
    out = [("token_embd.weight", w["tok_embd"])]
    if "pos_embd" in w:
        out.append(("position_embd.weight", w["pos_embd"]))
    names = GPT2_NAMES if cfg["arch"] == "gpt2" else LLAMA_NAMES
    if cfg["arch"] == "qwen2":
        names = names + QWEN2_BIAS_NAMES
    if cfg["arch"] == "qwen3":
        names = names + QWEN3_NORM_NAMES
    for i, L in enumerate(w["layers"]):
        out += [(f"blk.{i}.{n}", L[k]) for k, n in names]
    out.append(("output_norm.weight", w["out_norm"]))
    if "out_norm_b" in w:
        out.append(("output_norm.bias", w["out_norm_b"]))
    if not cfg["tied"]:
        out.append(("output.weight", w["output"]))
    return out


def loss_fn(cfg, w, tokens, targets):
    logits = torch.stack([gm.forward_a(cfg, w, list(row)) for row in tokens])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["n_vocab"]),
                                             torch.tensor(targets.reshape(-1), dtype=torch.long))


def random_batch(rng, n_vocab, B, T):
    """B x T random token ids and their next-token targets (the last drawn too)."""
    tokens = rng.integers(0, n_vocab, size=(B, T))
    targets = np.concatenate([tokens[:, 1:], rng.integers(0, n_vocab, size=(B, 1))], 1)
    return tokens, targets


def gradients(params, loss_of):
    """The loss loss_of() gives and d loss / d each of params (named tensors), by autograd;
    the parameters are left requiring gradients, with no gradient stored."""
    for _, p in params:
        p.requires_grad_(True)
    loss = loss_of()
    loss.backward()
    grads = [(n, p.grad.detach().clone()) for n, p in params]
    for _, p in params:
        p.grad = None
    return loss, grads


def adamw_losses(params, loss_of, loss0):
    """The loss before each of OPT["steps"] AdamW steps from the current weights (decay on
    matrices only, clipping at OPT["clip"]); loss_of() recomputes the loss, loss0 is the first."""
    decay = [p for _, p in params if p.dim() >= 2]
    no_decay = [p for _, p in params if p.dim() < 2]
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=OPT["weight_decay"]),
                             dict(params=no_decay, weight_decay=0.0)],
                            lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"])
    losses = []
    for _ in range(OPT["steps"]):
        opt.zero_grad()
        l = loss_of()
        l.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in params], OPT["clip"])
        opt.step()
        losses.append(l.item())
    assert abs(losses[0] - loss0.item()) < 1e-12
    assert losses[-1] < losses[0], "the reference trajectory should descend"
    return losses


def reference_gguf(B, T, tokens, targets, loss, grads, losses):
    """The NAME.ref.gguf writer (the keys are listed in the module docstring)."""
    ref = gm.GgufWriter()
    ref.add("general.architecture", gm.GGUF_STRING, "nexus-train-reference")
    ref.add("train.batch", gm.GGUF_U32, B)
    ref.add("train.seq", gm.GGUF_U32, T)
    ref.add_array("train.tokens", gm.GGUF_I32, [int(x) for x in tokens.reshape(-1)])
    ref.add_array("train.targets", gm.GGUF_I32, [int(x) for x in targets.reshape(-1)])
    ref.add("train.loss", gm.GGUF_F32, loss)
    ref.add_array("train.losses", gm.GGUF_F32, losses)
    for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "clip"):
        ref.add(f"train.{k}", gm.GGUF_F32, OPT[k])
    for n, g in grads:
        ref.add_tensor("grad." + n, g)
    return ref


def run_case(case):
    cfg = gm.full_config({k: v for k, v in case.items() if k not in ("batch", "seq", "seed")})
    rng = np.random.default_rng(case["seed"])
    w = make_weights(cfg, rng)
    gguf = gm.build_gguf(cfg, w)
    B, T = case["batch"], case["seq"]
    tokens, targets = random_batch(rng, cfg["n_vocab"], B, T)

    params = named_params(cfg, w)
    loss, grads = gradients(params, lambda: loss_fn(cfg, w, tokens, targets))

    losses = adamw_losses(params, lambda: loss_fn(cfg, w, tokens, targets), loss)
    ref = reference_gguf(B, T, tokens, targets, loss.item(), grads, losses)
    with open(os.path.join(OUT, case["name"] + ".gguf"), "wb") as f:
        f.write(gguf)
    with open(os.path.join(OUT, case["name"] + ".ref.gguf"), "wb") as f:
        f.write(ref.serialize())
    print(f"{case['name']}: loss {loss.item():.6f} -> {losses[-1]:.6f} after {OPT['steps']} steps, "
          f"{sum(p.numel() for _, p in params)} params")


# ---- Optimizers other than AdamW: SGD (torch.optim.SGD) and Adafactor (reference below) ----
# NAME.opt.gguf holds, for the batch of NAME.ref.gguf:
#   opt.sgd.losses, opt.adafactor.losses (f32 arrays)   loss before each of 20 steps
#   opt.sgd.{lr,momentum,weight_decay,clip} (f32), opt.sgd.nesterov (u32 0/1)
#   opt.adafactor.{lr,decay,eps1,clip_threshold,weight_decay,clip} (f32)
# Weight decay applies to tensors of rank >= 2 only, as in the trainer. The learning rates keep the
# trajectories well conditioned: with Adafactor at lr 1e-2 on llama_tied, a 1e-6 relative
# perturbation of the gradients moves the later losses by 1.5e-3, beyond any float32 comparison.
OPT_CASES = {
    "llama_tied": dict(sgd=dict(lr=0.05, momentum=0.9, nesterov=False, weight_decay=0.01),
                       adafactor=dict(lr=3e-3, decay=-0.8, eps1=1e-30, clip_threshold=1.0,
                                      weight_decay=0.1)),
    "llama_untied": dict(sgd=dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
                         adafactor=dict(lr=1e-2, decay=-0.8, eps1=1e-30, clip_threshold=1.0,
                                        weight_decay=0.0)),
}


def adafactor_reference(params, grads, state, t, o):
    """One Adafactor step, Shazeer & Stern (2018) Alg. 4 (matrices) and 5 (vectors), beta1 = 0,
    written with the paper's row / column sums: R = b R + (1-b) (G^2 + e1) 1, C likewise with 1^T,
    V = R C / (1^T R); U = G / sqrt(V); U /= max(1, RMS(U) / d); X -= lr U (decoupled decay
    X -= lr wd X first, on matrices)."""
    b = 1.0 - t ** o["decay"]
    with torch.no_grad():
        for k, (p, g) in enumerate(zip(params, grads)):
            g2 = g * g + o["eps1"]
            if p.dim() >= 2:
                g2m = g2.reshape(-1, g2.shape[-1])
                R, C = state.get(k, (torch.zeros(g2m.shape[0]), torch.zeros(g2m.shape[1])))
                R = b * R + (1 - b) * g2m.sum(dim=1)
                C = b * C + (1 - b) * g2m.sum(dim=0)
                state[k] = (R, C)
                V = (torch.outer(R, C) / R.sum()).reshape(g.shape)
            else:
                V = b * state.get(k, torch.zeros_like(g)) + (1 - b) * g2
                state[k] = V
            U = g / torch.sqrt(V)
            U = U / max(1.0, torch.sqrt(torch.mean(U * U)).item() / o["clip_threshold"])
            if p.dim() >= 2 and o["weight_decay"] != 0.0:
                p -= o["lr"] * o["weight_decay"] * p
            p -= o["lr"] * U


def optimizer_trajectory(cfg, case, tokens, targets, kind, o):
    w = make_weights(cfg, np.random.default_rng(case["seed"]))  # the weights run_case starts from
    params = [p for _, p in named_params(cfg, w)]
    for p in params:
        p.requires_grad_(True)
    if kind == "sgd":
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        opt = torch.optim.SGD([dict(params=decay, weight_decay=o["weight_decay"]),
                               dict(params=no_decay, weight_decay=0.0)],
                              lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"])
    state, losses = {}, []
    for t in range(1, OPT["steps"] + 1):
        for p in params:
            p.grad = None
        l = loss_fn(cfg, w, tokens, targets)
        l.backward()
        torch.nn.utils.clip_grad_norm_(params, OPT["clip"])
        if kind == "sgd":
            opt.step()
        else:
            adafactor_reference(params, [p.grad for p in params], state, t, o)
        losses.append(l.item())
    assert losses[-1] < losses[0], f"the {kind} reference trajectory should descend"
    return losses


def run_optimizer_case(case):
    cfg = gm.full_config({k: v for k, v in case.items() if k not in ("batch", "seq", "seed")})
    rng = np.random.default_rng(case["seed"])
    make_weights(cfg, rng)  # advance the generator exactly as run_case does
    tokens, targets = random_batch(rng, cfg["n_vocab"], case["batch"], case["seq"])
    ref = gm.GgufWriter()
    ref.add("general.architecture", gm.GGUF_STRING, "nexus-train-optimizer-reference")
    ref.add_array("train.tokens", gm.GGUF_I32, [int(x) for x in tokens.reshape(-1)])
    ref.add("opt.clip", gm.GGUF_F32, OPT["clip"])
    for kind, o in OPT_CASES[case["name"]].items():
        losses = optimizer_trajectory(cfg, case, tokens, targets, kind, o)
        ref.add_array(f"opt.{kind}.losses", gm.GGUF_F32, losses)
        for k, v in o.items():
            if isinstance(v, bool):
                ref.add(f"opt.{kind}.{k}", gm.GGUF_U32, int(v))
            else:
                ref.add(f"opt.{kind}.{k}", gm.GGUF_F32, v)
        print(f"{case['name']} {kind}: loss {losses[0]:.6f} -> {losses[-1]:.6f}")
    with open(os.path.join(OUT, case["name"] + ".opt.gguf"), "wb") as f:
        f.write(ref.serialize())


def main():
    """Writes every case, or only those named on the command line."""
    torch.set_default_dtype(torch.float64)
    os.makedirs(OUT, exist_ok=True)
    chosen = [c for c in CASES if len(sys.argv) < 2 or c["name"] in sys.argv[1:]]
    if not chosen:
        sys.exit("gen_train_fixtures.py: no case named " + " ".join(sys.argv[1:]))
    for case in chosen:
        run_case(case)
    for case in chosen:
        if case["name"] in OPT_CASES:
            run_optimizer_case(case)


if __name__ == "__main__":
    main()
