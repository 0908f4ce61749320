#!/usr/bin/python3
"""Golden fixtures for the state-space models: tiny random-weight Mamba-1 ("mamba"), Mamba-2
("mamba2") and hybrid Mamba-2 / attention ("granitehybrid", IBM Granite 4.0-H, Bamba style) models
written as GGUF files, with float64 reference logits and final recurrent states
(tests/fixtures/models/) and training references: loss, every gradient and a 20-step AdamW loss
trajectory (tests/fixtures/train/).

Run with Debian's python (torch + numpy, nothing else, no network):

    /usr/bin/python3 scripts/gen_ssm_fixtures.py              # writes all seven cases
    /usr/bin/python3 scripts/gen_ssm_fixtures.py mamba2_tied  # one case

The math (written here from these definitions; all in float64). mamba and mamba2 (granitehybrid
adds an FFN to every layer, below):
    x = token_embd[tokens];  per layer  x = x + mixer(rmsnorm(x) * attn_norm.weight);
    logits = (rmsnorm(x) * output_norm.weight) @ output.weight^T  (token_embd when tied)
with rmsnorm(v) = v / sqrt(mean(v^2) + eps), softplus(v) = log1p(exp(v)) for v <= 20 else v,
silu(v) = v * sigmoid(v), and a causal depthwise convolution of width K per channel c:
    conv(x)[t, c] = conv_b[c] + sum_{k<K} conv_w[c, k] * x[t - (K-1) + k, c]   (x[<0] = 0).

  Mamba-1 mixer (d_inner D, state N, rank R):
    x, z = split(h @ ssm_in^T, [D, D]);  u = silu(conv(x))
    dt_r, B, C = split(u @ ssm_x^T, [R, N, N]);  dt = softplus(dt_r @ ssm_dt^T + ssm_dt.bias)
    s[c, n] <- exp(dt[t,c] A[c,n]) s[c, n] + dt[t,c] B[t,n] u[t,c]       (A = ssm_a, s0 = 0)
    y[t, c] = sum_n s[c, n] C[t, n] + ssm_d[c] u[t, c];  out = (y * silu(z)) @ ssm_out^T
  Mamba-2 mixer (H heads of P = D/H channels, G groups of B/C, head h reads group h // (H/G)):
    z, xBC, dt_raw = split(h @ ssm_in^T, [D, D + 2GN, H]);  xBC = silu(conv(xBC))
    x, B, C = split(xBC, [D, GN, GN]) viewed [H, P], [G, N], [G, N]
    dt = softplus(dt_raw + ssm_dt.bias);  A[h] = ssm_a[h] (a negative scalar per head)
    s[h, p, n] <- exp(dt[t,h] A[h]) s[h, p, n] + dt[t,h] x[t,h,p] B[t,g,n]
    y[t, h, p] = sum_n s[h, p, n] C[t, g, n] + ssm_d[h] x[t, h, p]
    y = y * silu(z); each of the G slices of D/G channels RMS-normalised on its own (eps) and
    multiplied by ssm_norm.weight [G, D/G]; out = y @ ssm_out^T

  granitehybrid: layer i is recurrent (the Mamba-2 mixer above) or attention, as listed by
  .attention.head_count_kv[i] (0: recurrent), and every layer has a SwiGLU FFN as well:
    x = x + mixer_i(rmsnorm(x) * attn_norm.weight)
    x = x + ffn_down(silu(ffn_gate(u)) * ffn_up(u)),  u = rmsnorm(x) * ffn_norm.weight
  The attention mixer is llama's (gen_model_fixtures.py): q, k, v = h Wq^T, h Wk^T, h Wv^T (no
  biases), n_heads query heads of head_dim = dim / n_heads, n_kv_heads K/V heads (query head h
  reads K/V head h // (n_heads / n_kv_heads)), causal softmax(q k^T / sqrt(head_dim)) v, then
  attn_output. RoPE (llama's adjacent pairs, base 1e4, all of head_dim) only when
  .rope.scaling.finetuned is true; otherwise no positional encoding at all (NoPE, as Granite
  4.0-H ships). No embedding / residual / attention / logit multipliers.

Two formulations, which must agree to 1e-9 on every logit and on every recurrent layer's final conv
and SSM state before anything is written:
  A  batched torch, differentiated by autograd for the training references. Mamba-1 is the
     selective scan (exp(dt A) and dt B u on whole tensors, a python loop over time); Mamba-2 is
     the chunked SSD ("state space duality") form with chunks of L = 4 tokens: within a chunk
     y = (exp(segsum(dt A)) masked causal * (C B^T)) (dt x), across chunks the chunk-end states
     are passed on with the decays exp(segsum) of the chunk totals of dt A. A sequence whose
     length is not a multiple of L is padded at the end with dt = 0, x = 0 rows (decay 1, no
     input), which are dropped afterwards. The convolution is torch's grouped conv1d. Attention
     is a full causal mask over the sequence with repeat_interleave'd K/V heads and
     gen_model_fixtures' rotate-half RoPE on a permuted view.
  B  numpy, one token at a time as a decoder with a recurrent cache runs it: a rolling conv state
     of the last K-1 conv inputs and the SSM state updated in place (per-head loops for Mamba-2),
     and for attention layers a growing K/V cache with per-head loops and gen_model_fixtures'
     complex-multiplication RoPE.
The fixtures are also checked to be sensitive (the gen_model_fixtures.py way): each of these
mistakes moves the logits by more than 100 times the C++ F32 tolerance 1e-4 + 1e-5 |ref|:
softplus omitted, conv taps reversed, B and C swapped, ssm_d omitted, the state reset at every
token, and for the Mamba-2 mixer (mamba2, granitehybrid) head h reading group h % G, and the group
norm applied before the gate; for granitehybrid also RoPE toggled (applied to the NoPE case, left
out of the RoPE case), the NeoX (halves) RoPE style (RoPE case), the layer kinds shifted by one
(the first attention layer's mixer swapped with its recurrent neighbour's, norms and FFNs in
place), the FFN skipped on the recurrent layers, and query head h reading K/V head h % n_kv_heads.

Files. tests/fixtures/models/NAME.{gguf,logits.bin,json} exactly as gen_model_fixtures.py writes
them (see tests/fixtures/models/README.md); NAME.json also holds, for sequence 0, every layer's
final conv state ([K-1][channels], oldest token first: the conv inputs, i.e. x for mamba and xBC
for mamba2 and granitehybrid, before the convolution) and SSM state (mamba [d_inner][N], mamba2 and
granitehybrid [H][P][N]), row-major; for granitehybrid only the recurrent layers are listed, each
with its "layer" index.
tests/fixtures/train/NAME.gguf + NAME.ref.gguf exactly as gen_train_fixtures.py writes them:
train.batch/seq/tokens/targets/loss, train.losses of 20 AdamW steps with train.lr/beta1/beta2/
eps/weight_decay/clip (its OPT; weight decay on the tensors of rank >= 2, as the trainer does,
which here includes ssm_conv1d.weight, ssm_a, and the Mamba-2 mixer's ssm_d [H, 1] and
ssm_norm.weight) and grad.NAME = d mean cross-entropy / d the tensor NAME as stored
(grad.blk.0.ssm_a is w.r.t. A itself; tied: token_embd gets both uses). The gradients are also checked against central
differences on a few elements of every tensor.

GGUF: llama.cpp's names and keys (ARCH.ssm.conv_kernel, .ssm.inner_size, .ssm.state_size,
.ssm.time_step_rank (mamba: R; mamba2, granitehybrid: H), .ssm.group_count (mamba2,
granitehybrid)); dims are written innermost first, so a numpy [a, b] tensor has ggml ne = {b, a}.
granitehybrid also has .feed_forward_length, .attention.head_count, .attention.head_count_kv (a u32
array, one entry per layer: 0 for the recurrent layers), .rope.freq_base, .rope.dimension_count
(= head_dim) and .rope.scaling.finetuned (bool: the attention layers use RoPE); its recurrent
layers hold mamba2's block tensors, its attention layers attn_q/attn_k/attn_v/attn_output.weight,
and every layer attn_norm, ffn_norm, ffn_gate, ffn_up and ffn_down.weight.
"""

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_fixtures as gm  # noqa: E402
import gen_train_fixtures as gt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# --------------------------------------------------------------------------------------------
# Cases. The mutation flags (softplus ... norm_first, and granitehybrid's rope_style ...
# mixer_from) are only changed by the self-check's deliberate mistakes (see MUTATIONS and
# hybrid_mutations). New cases go at the end: an inference case's seed follows its index.
# --------------------------------------------------------------------------------------------

BASE = dict(n_ctx=64, n_layers=2, dim=32, d_inner=64, d_conv=4, norm_eps=1e-5, chunk=4,
            seq_lens=(9, 13), softplus=True, conv_flip=False, swap_bc=False, use_d=True,
            recurrence=True, group_map="div", norm_first=False)
MAMBA = dict(arch="mamba", d_state=8, dt_rank=4, tied=False)
MAMBA2 = dict(arch="mamba2", d_state=16, n_head=4, n_group=2, tied=True)
# granitehybrid: the Mamba-2 mixer of MAMBA2 on the recurrent layers (n_head SSM heads), llama
# attention with n_heads query / n_kv_heads K/V heads on the others, a SwiGLU FFN on every layer.
# rope_style "neox", gqa_map "tile", ffn_on_ssm False and mixer_from (layer i runs the mixer of
# layer mixer_from[i]) are mistakes; attn_self_only (each query sees only its own key) is used
# by scale_stats to measure how much attention takes from earlier tokens.
GRANITE = dict(arch="granitehybrid", n_layers=4, layer_kinds=("ssm", "attn", "ssm", "ssm"),
               d_state=16, n_head=4, n_group=2, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=48,
               rope=False, rope_base=10000.0, tied=True, rope_style="normal",
               gqa_map="interleave", ffn_on_ssm=True, mixer_from=None, attn_self_only=False)

CASES = [
    dict(MAMBA, name="mamba", kind="model", n_vocab=96,
         checks="mamba (Mamba-1): d_inner 64, d_state 8, d_conv 4, dt_rank 4, untied output; "
                "selective scan with per-channel A [d_inner, N], dt = softplus(dt_r W_dt^T + b), "
                "D skip, silu(z) gate"),
    dict(MAMBA2, name="mamba2", kind="model", n_vocab=96,
         checks="mamba2 (Mamba-2): d_inner 64 = 4 heads x 16, d_state 16, 2 groups of B/C (head h "
                "reads group h // 2), d_conv 4 over x, B and C, scalar A per head, gated grouped "
                "RMSNorm (norm after the gate), tied output"),
    dict(MAMBA, name="mamba_untied", kind="train", n_vocab=64, batch=2, seq=12, seed=21),
    dict(MAMBA2, name="mamba2_tied", kind="train", n_vocab=64, batch=2, seq=10, seed=22),
    dict(GRANITE, name="granitehybrid", kind="model", n_vocab=96,
         checks="granitehybrid (Granite 4.0-H style hybrid): 4 layers ssm, attn, ssm, ssm "
                "(head_count_kv [0, 2, 0, 0]); Mamba-2 mixer as mamba2 (d_inner 64 = 4 heads x 16, "
                "d_state 16, 2 groups, d_conv 4); attention 4 query / 2 KV heads of head_dim 16 (key_length), "
                "no RoPE (rope.scaling.finetuned false); SwiGLU FFN 48 on every layer; tied"),
    dict(GRANITE, name="granitehybrid_rope", kind="model", n_vocab=96,
         layer_kinds=("attn", "ssm", "ssm", "attn"), rope=True, tied=False,
         checks="granitehybrid with layers attn, ssm, ssm, attn (head_count_kv [2, 0, 0, 2]) and "
                "llama's adjacent-pair RoPE base 1e4 over head_dim 16 (rope.scaling.finetuned "
                "true), GQA 4/2, SwiGLU FFN 48 on every layer, untied output"),
    dict(GRANITE, name="granitehybrid_tied", kind="train", n_vocab=64, batch=2, seq=10, seed=23),
]

MUTATIONS = [  # (what, config change, archs)
    ("softplus omitted", dict(softplus=False), ("mamba", "mamba2")),
    ("conv taps reversed", dict(conv_flip=True), ("mamba", "mamba2")),
    ("B and C swapped", dict(swap_bc=True), ("mamba", "mamba2")),
    ("D omitted", dict(use_d=False), ("mamba", "mamba2")),
    ("state reset every token", dict(recurrence=False), ("mamba", "mamba2")),
    ("head h -> group h % G", dict(group_map="mod"), ("mamba2",)),
    ("group norm before the gate", dict(norm_first=True), ("mamba2",)),
]
LEAST_EXCESS = 100


def hybrid_mutations(cfg):
    """granitehybrid's mistakes: the Mamba-2 mixer's (MUTATIONS) plus those of the hybrid
    structure and its attention, as (what, config change)."""
    m = [(what, change) for what, change, archs in MUTATIONS if "mamba2" in archs]
    kinds = cfg["layer_kinds"]
    if cfg["rope"]:
        m.append(("RoPE left out", dict(rope=False)))
        m.append(("NeoX RoPE (halves)", dict(rope_style="neox")))
    else:
        m.append(("RoPE applied (NoPE model)", dict(rope=True)))
    a = kinds.index("attn")  # the first attention layer changes places with a recurrent neighbour
    b = a + 1 if a + 1 < len(kinds) and kinds[a + 1] != "attn" else a - 1
    order = list(range(len(kinds)))
    order[a], order[b] = b, a
    m.append((f"layer kinds shifted (attention at layer {b}, not {a})", dict(mixer_from=order)))
    m.append(("FFN skipped on recurrent layers", dict(ffn_on_ssm=False)))
    m.append(("GQA head h -> KV head h % n_kv", dict(gqa_map="tile")))
    return m


def full_config(case):
    """The case over BASE, with its derived sizes: ssm_head_dim (P, channels per SSM head of the
    Mamba-2 mixer; mamba2's JSON calls it head_dim), head_dim (granitehybrid: the attention head
    width), conv_channels, and layer_kinds ("ssm" for every layer of mamba and mamba2)."""
    cfg = dict(BASE)
    cfg.update(case)
    if cfg["arch"] == "mamba":
        cfg["conv_channels"] = cfg["d_inner"]
    else:
        cfg["ssm_head_dim"] = cfg["d_inner"] // cfg["n_head"]
        cfg["conv_channels"] = cfg["d_inner"] + 2 * cfg["n_group"] * cfg["d_state"]
    if cfg["arch"] == "mamba2":
        cfg["head_dim"] = cfg["ssm_head_dim"]
    if cfg["arch"] == "granitehybrid":
        # head_dim 16 > dim / heads keeps the K/V row (2 x 16) a multiple of 32, which a Q8_0 KV
        # cache needs (and writes attention.key_length / value_length).
        cfg["head_dim"] = cfg.get("head_dim") or cfg["dim"] // cfg["n_heads"]
        cfg["layer_kinds"] = list(cfg["layer_kinds"])
        assert len(cfg["layer_kinds"]) == cfg["n_layers"]
    else:
        cfg["layer_kinds"] = ["ssm"] * cfg["n_layers"]
    return cfg


# --------------------------------------------------------------------------------------------
# Weights: drawn in float64, rounded to float32 once (what the GGUF holds), used in float64.
# Scaled so that every activation is O(1): dt = softplus(bias + ...) with softplus(bias) in
# [0.05, 0.5] (log-uniform, the Mamba initialisation), A in [-8, -1], so exp(dt A) spans ~0.02..0.95
# and a token's input is remembered for a few steps: the state matters as much as the D skip.
# granitehybrid's attention and FFN weights are gen_model_fixtures'/gen_train_fixtures' (q and k
# with gain 1.5 so that the softmax is not flat, v, output and FFN projections with gain 1), and
# so is its embedding std of 0.25: with 0.5 its four tied layers learn the training batch within
# the 20 AdamW steps (loss 7.9 -> 0.007, where float32 cross-entropy's rounding is 2e-6 of the
# loss); with 0.25 it goes 5.1 -> 0.15 (mamba2_tied: 7.8 -> 0.13).
# --------------------------------------------------------------------------------------------

def make_weights(cfg, rng):
    d, di, N, K, V = cfg["dim"], cfg["d_inner"], cfg["d_state"], cfg["d_conv"], cfg["n_vocab"]
    ch = cfg["conv_channels"]

    def t(a):
        return torch.from_numpy(np.asarray(a, dtype=np.float64).astype(np.float32)
                                .astype(np.float64))

    def normal(shape, std):
        return t(rng.standard_normal(shape) * std)

    def lin(n_out, n_in, gain=1.0):  # torch layout (out, in): y = x W^T
        return normal((n_out, n_in), gain / math.sqrt(n_in))

    def norm_w(shape):
        return t(1.0 + 0.1 * rng.standard_normal(shape))

    def dt_bias(n):  # softplus^-1 of a log-uniform dt in [0.05, 0.5]
        dt = np.exp(rng.uniform(math.log(0.05), math.log(0.5), n))
        return t(np.log(np.expm1(dt)))

    emb_std = 0.25 if cfg["arch"] == "granitehybrid" else 0.5
    w = {"tok_embd": normal((V, d), emb_std), "layers": []}
    for kind in cfg["layer_kinds"]:
        L = {"attn_norm": norm_w(d)}
        if kind == "attn":
            qd, kvd = cfg["n_heads"] * cfg["head_dim"], cfg["n_kv_heads"] * cfg["head_dim"]
            L["wq"], L["wk"], L["wv"] = lin(qd, d, 1.5), lin(kvd, d, 1.5), lin(kvd, d)
            L["wo"] = lin(d, qd)
        elif cfg["arch"] == "mamba":
            R = cfg["dt_rank"]
            L["ssm_in"] = lin(2 * di, d)
            L["conv_w"], L["conv_b"] = normal((ch, K), 0.5), normal(ch, 0.1)
            L["ssm_x"] = lin(R + 2 * N, di, 1.5)
            L["ssm_dt"] = lin(di, R, 0.5)
            L["dt_bias"] = dt_bias(di)
            L["ssm_a"] = t(-rng.uniform(1.0, 8.0, (di, N)))
            L["ssm_d"] = t(rng.uniform(0.5, 1.5, di))
        else:
            H, G = cfg["n_head"], cfg["n_group"]
            L["ssm_in"] = lin(2 * di + 2 * G * N + H, d)
            L["conv_w"], L["conv_b"] = normal((ch, K), 0.5), normal(ch, 0.1)
            L["dt_bias"] = dt_bias(H)
            L["ssm_a"] = t(-rng.uniform(1.0, 8.0, (H, 1)))
            L["ssm_d"] = t(rng.uniform(0.5, 1.5, (H, 1)))
            L["ssm_norm"] = norm_w((G, di // G))
        if kind == "ssm":
            L["ssm_out"] = lin(d, di)
        if cfg["arch"] == "granitehybrid":
            f = cfg["ffn_dim"]
            L["ffn_norm"] = norm_w(d)
            L["w_gate"], L["w_up"], L["w_down"] = lin(f, d), lin(f, d), lin(d, f)
        w["layers"].append(L)
    w["out_norm"] = norm_w(d)
    w["output"] = w["tok_embd"] if cfg["tied"] else lin(V, d)
    return w


LAYER_NAMES = [("attn_norm", "attn_norm.weight"), ("ssm_in", "ssm_in.weight"),
               ("conv_w", "ssm_conv1d.weight"), ("conv_b", "ssm_conv1d.bias"),
               ("ssm_x", "ssm_x.weight"), ("ssm_dt", "ssm_dt.weight"), ("dt_bias", "ssm_dt.bias"),
               ("ssm_a", "ssm_a"), ("ssm_d", "ssm_d"), ("ssm_norm", "ssm_norm.weight"),
               ("ssm_out", "ssm_out.weight"),
               ("wq", "attn_q.weight"), ("wk", "attn_k.weight"), ("wv", "attn_v.weight"),
               ("wo", "attn_output.weight"), ("ffn_norm", "ffn_norm.weight"),
               ("w_gate", "ffn_gate.weight"), ("w_up", "ffn_up.weight"),
               ("w_down", "ffn_down.weight")]


def named_params(cfg, w):
    """(gguf name, tensor) of every distinct parameter, in the GGUF's order."""
    out = [("token_embd.weight", w["tok_embd"])]
    for i, L in enumerate(w["layers"]):
        out += [(f"blk.{i}.{n}", L[k]) for k, n in LAYER_NAMES if k in L]
    out.append(("output_norm.weight", w["out_norm"]))
    if not cfg["tied"]:
        out.append(("output.weight", w["output"]))
    return out


def build_gguf(cfg, w):
    a = cfg["arch"]
    gw = gm.GgufWriter()
    gw.add("general.architecture", gm.GGUF_STRING, a)
    gw.add("general.name", gm.GGUF_STRING, "nexus-fixture-" + cfg["name"])
    gw.add("general.file_type", gm.GGUF_U32, 0)  # all F32
    gw.add(f"{a}.context_length", gm.GGUF_U32, cfg["n_ctx"])
    gw.add(f"{a}.embedding_length", gm.GGUF_U32, cfg["dim"])
    gw.add(f"{a}.block_count", gm.GGUF_U32, cfg["n_layers"])
    if a == "granitehybrid":
        gw.add(f"{a}.feed_forward_length", gm.GGUF_U32, cfg["ffn_dim"])
        gw.add(f"{a}.attention.head_count", gm.GGUF_U32, cfg["n_heads"])
        # One entry per layer; 0 marks a recurrent layer (how llama.cpp tells the kinds apart).
        gw.add_array(f"{a}.attention.head_count_kv", gm.GGUF_U32,
                     [cfg["n_kv_heads"] if k == "attn" else 0 for k in cfg["layer_kinds"]])
        if cfg["head_dim"] * cfg["n_heads"] != cfg["dim"]:
            gw.add(f"{a}.attention.key_length", gm.GGUF_U32, cfg["head_dim"])
            gw.add(f"{a}.attention.value_length", gm.GGUF_U32, cfg["head_dim"])
    else:
        gw.add(f"{a}.feed_forward_length", gm.GGUF_U32, 0)
        gw.add(f"{a}.attention.head_count", gm.GGUF_U32, 0)
    gw.add(f"{a}.attention.layer_norm_rms_epsilon", gm.GGUF_F32, cfg["norm_eps"])
    if a == "granitehybrid":
        gw.add(f"{a}.rope.freq_base", gm.GGUF_F32, cfg["rope_base"])
        gw.add(f"{a}.rope.dimension_count", gm.GGUF_U32, cfg["head_dim"])
        gw.add(f"{a}.rope.scaling.finetuned", gm.GGUF_BOOL, cfg["rope"])  # false: NoPE
    gw.add(f"{a}.ssm.conv_kernel", gm.GGUF_U32, cfg["d_conv"])
    gw.add(f"{a}.ssm.inner_size", gm.GGUF_U32, cfg["d_inner"])
    gw.add(f"{a}.ssm.state_size", gm.GGUF_U32, cfg["d_state"])
    gw.add(f"{a}.ssm.time_step_rank", gm.GGUF_U32,
           cfg["dt_rank"] if a == "mamba" else cfg["n_head"])
    if a != "mamba":
        gw.add(f"{a}.ssm.group_count", gm.GGUF_U32, cfg["n_group"])
    # Byte-level BPE vocabulary with the "gpt-2" pre-tokenizer (Mamba checkpoints ship the
    # GPT-NeoX tokenizer, a byte-level BPE of the same kind).
    gm.add_vocab(gw, dict(cfg, arch="gpt2"))
    for name, t in named_params(cfg, w):
        gw.add_tensor(name, t)
    return gw.serialize()


# --------------------------------------------------------------------------------------------
# Formulation A: batched torch (float64), differentiable.
# --------------------------------------------------------------------------------------------

def rms_norm_a(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def softplus_a(v, cfg):
    if not cfg["softplus"]:
        return v
    return torch.where(v <= 20.0, torch.log1p(torch.exp(torch.clamp(v, max=20.0))), v)


def silu_a(v):
    return v * torch.sigmoid(v)


def conv_a(cfg, x, L):
    """Causal depthwise conv + bias of x (b, T, ch) with torch's grouped conv1d (a correlation:
    tap k meets input t - (K-1) + k after K-1 zeros of left padding)."""
    T, ch, K = x.shape[1], x.shape[2], cfg["d_conv"]
    wt = L["conv_w"].flip(-1) if cfg["conv_flip"] else L["conv_w"]
    y = torch.nn.functional.conv1d(x.transpose(1, 2), wt[:, None, :], L["conv_b"],
                                   padding=K - 1, groups=ch)
    return y[..., :T].transpose(1, 2)


def conv_state_a(cfg, x):
    """The last K-1 conv inputs (b, K-1, ch), oldest first, zeros before the sequence."""
    K = cfg["d_conv"]
    return torch.nn.functional.pad(x, (0, 0, K - 1, 0))[:, -(K - 1):]


def mamba_mixer_a(cfg, L, h):
    di, N, R = cfg["d_inner"], cfg["d_state"], cfg["dt_rank"]
    b, T, _ = h.shape
    xz = h @ L["ssm_in"].T
    x, z = xz[..., :di], xz[..., di:]
    u = silu_a(conv_a(cfg, x, L))
    xdb = u @ L["ssm_x"].T
    dt_r, Bm, Cm = xdb[..., :R], xdb[..., R:R + N], xdb[..., R + N:]
    if cfg["swap_bc"]:
        Bm, Cm = Cm, Bm
    dt = softplus_a(dt_r @ L["ssm_dt"].T + L["dt_bias"], cfg)          # (b, T, di)
    dA = torch.exp(torch.einsum("btd,dn->btdn", dt, L["ssm_a"]))
    dBu = torch.einsum("btd,btn,btd->btdn", dt, Bm, u)
    s = torch.zeros(b, di, N)
    ys = []
    for t in range(T):
        s = dA[:, t] * s + dBu[:, t] if cfg["recurrence"] else dBu[:, t]
        ys.append(torch.einsum("bdn,bn->bd", s, Cm[:, t]))
    y = torch.stack(ys, 1)
    if cfg["use_d"]:
        y = y + u * L["ssm_d"]
    out = (y * silu_a(z)) @ L["ssm_out"].T
    return out, conv_state_a(cfg, x), s


def segsum(a):
    """a (..., n) -> (..., n, n): out[i, j] = a[j+1] + ... + a[i] for i >= j, -inf above."""
    cs = torch.cumsum(a, -1)
    n = a.shape[-1]
    seg = cs[..., :, None] - cs[..., None, :]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return seg.masked_fill(~causal, float("-inf"))


def ssd_chunked(X, a, B, C, L):
    """Chunked SSD scan. X (b, T, h, p) = dt x; a (b, T, h) = dt A; B, C (b, T, h, n) (already
    mapped to heads). Returns y (b, T, h, p) without the D term and the final state (b, h, p, n).
    T is padded at the end to a multiple of L with zero rows (decay exp(0) = 1, no input)."""
    b, T, h, p = X.shape
    pad = -T % L
    if pad:
        X = torch.nn.functional.pad(X, (0, 0, 0, 0, 0, pad))
        a = torch.nn.functional.pad(a, (0, 0, 0, pad))
        B = torch.nn.functional.pad(B, (0, 0, 0, 0, 0, pad))
        C = torch.nn.functional.pad(C, (0, 0, 0, 0, 0, pad))
    c = (T + pad) // L
    X, B, C = (v.reshape(b, c, L, h, -1) for v in (X, B, C))
    a = a.reshape(b, c, L, h).permute(0, 3, 1, 2)                   # (b, h, c, l)
    a_cs = torch.cumsum(a, -1)
    # 1. within each chunk: y_l = sum_{s <= l} (C_l . B_s) exp(a_{s+1} + ... + a_l) X_s
    decay = torch.exp(segsum(a))                                      # (b, h, c, l, s)
    y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, decay, X)
    # 2. the state each chunk leaves at its end, from its own inputs only
    to_end = torch.exp(a_cs[..., -1:] - a_cs)                         # (b, h, c, l)
    chunk_states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, to_end, X)
    # 3. pass the states across chunks: state entering chunk z = sum_{c < z} of chunk c's state
    #    decayed by the totals of chunks c+1 .. z-1 (segsum over the chunk totals, zero first)
    states = torch.cat([torch.zeros_like(chunk_states[:, :1]), chunk_states], 1)
    totals = torch.nn.functional.pad(a_cs[..., -1], (1, 0))            # (b, h, c+1)
    passed = torch.einsum("bhzc,bchpn->bzhpn", torch.exp(segsum(totals)), states)
    entering, final = passed[:, :-1], passed[:, -1]
    # 4. the contribution of the entering state to each position of the chunk
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, entering, torch.exp(a_cs))
    y = (y_diag + y_off).reshape(b, c * L, h, p)[:, :T]
    return y, final


def group_rms_a(cfg, y, wt):
    b, T, di = y.shape
    G = cfg["n_group"]
    return rms_norm_a(y.reshape(b, T, G, di // G), wt, cfg["norm_eps"]).reshape(b, T, di)


def mamba2_mixer_a(cfg, L, h):
    di, N, H, G = cfg["d_inner"], cfg["d_state"], cfg["n_head"], cfg["n_group"]
    P = cfg["ssm_head_dim"]
    b, T, _ = h.shape
    zxbcdt = h @ L["ssm_in"].T
    z, xBC, dt_raw = zxbcdt[..., :di], zxbcdt[..., di:2 * di + 2 * G * N], zxbcdt[..., -H:]
    xc = silu_a(conv_a(cfg, xBC, L))
    x = xc[..., :di].reshape(b, T, H, P)
    Bm = xc[..., di:di + G * N].reshape(b, T, G, N)
    Cm = xc[..., di + G * N:].reshape(b, T, G, N)
    if cfg["swap_bc"]:
        Bm, Cm = Cm, Bm
    heads = torch.arange(H)
    group = heads // (H // G) if cfg["group_map"] == "div" else heads % G
    Bh, Ch = Bm[:, :, group], Cm[:, :, group]                         # (b, T, H, N)
    dt = softplus_a(dt_raw + L["dt_bias"], cfg)                       # (b, T, H)
    A = L["ssm_a"].reshape(H)
    X = x * dt[..., None]
    if cfg["recurrence"]:
        y, s = ssd_chunked(X, dt * A, Bh, Ch, cfg["chunk"])
    else:  # each token sees only its own input
        y = torch.einsum("bthn,bthn,bthp->bthp", Ch, Bh, X)
        s = torch.einsum("bhn,bhp->bhpn", Bh[:, -1], X[:, -1])
    if cfg["use_d"]:
        y = y + x * L["ssm_d"].reshape(H, 1)
    y = y.reshape(b, T, di)
    if cfg["norm_first"]:
        y = group_rms_a(cfg, y, L["ssm_norm"]) * silu_a(z)
    else:
        y = group_rms_a(cfg, y * silu_a(z), L["ssm_norm"])
    return y @ L["ssm_out"].T, conv_state_a(cfg, xBC), s


def rope_cfg(cfg):
    """The keys gen_model_fixtures' rope_a / rope_b read, for granitehybrid's attention."""
    return dict(rope=cfg["rope_style"] if cfg["rope"] else "none", rope_dim=cfg["head_dim"],
                rope_base=cfg["rope_base"])


def attention_a(cfg, L, h):
    """llama's causal GQA attention of h (b, T, dim), positions 0..T-1, no biases."""
    H, KV, hd = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    b, T, _ = h.shape
    q = (h @ L["wq"].T).view(b, T, H, hd)
    k = (h @ L["wk"].T).view(b, T, KV, hd)
    v = (h @ L["wv"].T).view(b, T, KV, hd)
    pos = torch.arange(T)
    q, k = gm.rope_a(q, pos, rope_cfg(cfg)), gm.rope_a(k, pos, rope_cfg(cfg))  # "none": as is
    if cfg["gqa_map"] == "interleave":  # query head h reads KV head h // (H / KV)
        k, v = k.repeat_interleave(H // KV, dim=2), v.repeat_interleave(H // KV, dim=2)
    else:                               # wrong on purpose (mutation): h % KV
        k, v = k.repeat(1, 1, H // KV, 1), v.repeat(1, 1, H // KV, 1)
    s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(hd)
    i, j = pos[:, None], pos[None, :]
    visible = (j == i) if cfg["attn_self_only"] else (j <= i)
    s = s.masked_fill(~visible, float("-inf"))
    a = torch.einsum("bhij,bjhd->bihd", torch.softmax(s, -1), v).reshape(b, T, H * hd)
    return a @ L["wo"].T


def swiglu_a(L, u):
    return (silu_a(u @ L["w_gate"].T) * (u @ L["w_up"].T)) @ L["w_down"].T


def forward_a(cfg, w, tokens):
    """tokens (b, T) -> logits (b, T, n_vocab) and, per layer, (conv state (b, K-1, ch),
    SSM state (b, d_inner, N) or (b, H, P, N)) after the last token; None for attention layers."""
    eps = cfg["norm_eps"]
    ssm_mixer = mamba_mixer_a if cfg["arch"] == "mamba" else mamba2_mixer_a
    layers = w["layers"]
    mixer_from = cfg.get("mixer_from") or range(len(layers))
    x = w["tok_embd"][torch.as_tensor(tokens, dtype=torch.long)]
    states = []
    for i, L in enumerate(layers):
        M = layers[mixer_from[i]]  # the mixer's weights (another layer's only in a mutation)
        h = rms_norm_a(x, L["attn_norm"], eps)
        kind = cfg["layer_kinds"][mixer_from[i]]
        if kind == "attn":
            x = x + attention_a(cfg, M, h)
            states.append(None)
        else:
            out, conv, ssm = ssm_mixer(cfg, M, h)
            x = x + out
            states.append((conv, ssm))
        if "ffn_norm" in L and (kind == "attn" or cfg["ffn_on_ssm"]):  # granitehybrid
            x = x + swiglu_a(L, rms_norm_a(x, L["ffn_norm"], eps))
    x = rms_norm_a(x, w["out_norm"], eps)
    return x @ w["output"].T, states


# --------------------------------------------------------------------------------------------
# Formulation B: numpy, one token at a time with a recurrent cache (rolling conv state of the
# last K-1 inputs, SSM state updated in place), per-head loops for Mamba-2.
# --------------------------------------------------------------------------------------------

def softplus_b(v):
    return np.where(v <= 20.0, np.log1p(np.exp(np.minimum(v, 20.0))), v)


def silu_b(v):
    return v / (1.0 + np.exp(-v))


def rms_b(x, wt, eps):
    return x / np.sqrt(np.mean(x * x) + eps) * wt


def conv_step_b(conv_state, xt, L):
    """conv_state (K-1, ch) oldest first; returns conv(x)[t] and the shifted state."""
    window = np.concatenate([conv_state, xt[None]], 0)              # (K, ch)
    K = window.shape[0]
    y = L["conv_b"].copy()
    for k in range(K):
        y += L["conv_w"][:, k] * window[k]
    return y, window[1:]


def mamba_step_b(cfg, L, h, cache):
    di, N, R = cfg["d_inner"], cfg["d_state"], cfg["dt_rank"]
    xz = L["ssm_in"] @ h
    x, z = xz[:di], xz[di:]
    u, cache["conv"] = conv_step_b(cache["conv"], x, L)
    u = silu_b(u)
    xdb = L["ssm_x"] @ u
    dt_r, Bt, Ct = xdb[:R], xdb[R:R + N], xdb[R + N:]
    dt = softplus_b(L["ssm_dt"] @ dt_r + L["dt_bias"])
    s = cache["ssm"]
    for c in range(di):
        s[c] = np.exp(dt[c] * L["ssm_a"][c]) * s[c] + dt[c] * u[c] * Bt
    y = s @ Ct + L["ssm_d"] * u
    return L["ssm_out"] @ (y * silu_b(z))


def mamba2_step_b(cfg, L, h, cache):
    di, N, H, G = cfg["d_inner"], cfg["d_state"], cfg["n_head"], cfg["n_group"]
    P = cfg["ssm_head_dim"]
    zxbcdt = L["ssm_in"] @ h
    z, xBC, dt_raw = zxbcdt[:di], zxbcdt[di:2 * di + 2 * G * N], zxbcdt[2 * di + 2 * G * N:]
    xc, cache["conv"] = conv_step_b(cache["conv"], xBC, L)
    xc = silu_b(xc)
    x = xc[:di].reshape(H, P)
    Bt = xc[di:di + G * N].reshape(G, N)
    Ct = xc[di + G * N:].reshape(G, N)
    dt = softplus_b(dt_raw + L["dt_bias"])
    s = cache["ssm"]
    y = np.zeros((H, P))
    for hh in range(H):
        g = hh // (H // G)
        s[hh] = np.exp(dt[hh] * L["ssm_a"][hh, 0]) * s[hh] + dt[hh] * np.outer(x[hh], Bt[g])
        y[hh] = s[hh] @ Ct[g] + L["ssm_d"][hh, 0] * x[hh]
    y = y.reshape(di) * silu_b(z)
    gs = di // G
    for g in range(G):
        y[g * gs:(g + 1) * gs] = rms_b(y[g * gs:(g + 1) * gs], L["ssm_norm"][g], cfg["norm_eps"])
    return L["ssm_out"] @ y


def attention_step_b(cfg, L, h, cache):
    """One token of llama attention at position p = tokens already in the K/V cache (lists of
    (KV, head_dim) rows, RoPE'd keys)."""
    H, KV, hd = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    p = len(cache["k"])
    q = (L["wq"] @ h).reshape(H, hd)
    k = (L["wk"] @ h).reshape(KV, hd)
    q, k = gm.rope_b(q, p, rope_cfg(cfg)), gm.rope_b(k, p, rope_cfg(cfg))
    cache["k"].append(k)
    cache["v"].append((L["wv"] @ h).reshape(KV, hd))
    att = np.zeros((H, hd))
    for hh in range(H):
        g = hh // (H // KV)
        s = np.array([q[hh] @ kj[g] for kj in cache["k"]]) / math.sqrt(hd)
        e = np.exp(s - s.max())
        e /= e.sum()
        att[hh] = sum(ej * vj[g] for ej, vj in zip(e, cache["v"]))
    return L["wo"] @ att.reshape(-1)


def forward_b(cfg, w, tokens):
    """One sequence: logits (T, n_vocab) and the caches [(conv (K-1, ch), ssm)] at the end (None
    for attention layers)."""
    eps = cfg["norm_eps"]
    layers = [{k: v.numpy() for k, v in L.items()} for L in w["layers"]]
    ssm_shape = ((cfg["d_inner"], cfg["d_state"]) if cfg["arch"] == "mamba" else
                 (cfg["n_head"], cfg["ssm_head_dim"], cfg["d_state"]))
    caches = [dict(conv=np.zeros((cfg["d_conv"] - 1, cfg["conv_channels"])),
                   ssm=np.zeros(ssm_shape)) if kind == "ssm" else dict(k=[], v=[])
              for kind in cfg["layer_kinds"]]
    ssm_step = mamba_step_b if cfg["arch"] == "mamba" else mamba2_step_b
    emb, out_w, out_norm = w["tok_embd"].numpy(), w["output"].numpy(), w["out_norm"].numpy()
    logits = []
    for tok in tokens:
        x = emb[tok].copy()
        for L, kind, cache in zip(layers, cfg["layer_kinds"], caches):
            step = attention_step_b if kind == "attn" else ssm_step
            x = x + step(cfg, L, rms_b(x, L["attn_norm"], eps), cache)
            if "ffn_norm" in L:  # granitehybrid: every layer
                u = rms_b(x, L["ffn_norm"], eps)
                x = x + L["w_down"] @ (silu_b(L["w_gate"] @ u) * (L["w_up"] @ u))
        logits.append(out_w @ rms_b(x, out_norm, eps))
    return np.stack(logits), [(c["conv"], c["ssm"]) if "ssm" in c else None for c in caches]


# --------------------------------------------------------------------------------------------
# Self-checks.
# --------------------------------------------------------------------------------------------

def agreement(cfg, w, seqs):
    """Largest |A - B| over the logits and over the final states of every recurrent layer."""
    d_logits = d_states = 0.0
    for s in seqs:
        la, sa = forward_a(cfg, w, [s])
        lb, sb = forward_b(cfg, w, s)
        d_logits = max(d_logits, float(np.abs(la[0].numpy() - lb).max()))
        for (ca, ma), (cb, mb) in ((a, b) for a, b in zip(sa, sb) if a is not None):
            d_states = max(d_states, float(np.abs(ca[0].numpy() - cb).max()),
                           float(np.abs(ma[0].numpy() - mb).max()))
    if not (d_logits <= 1e-9 and d_states <= 1e-9):
        sys.exit(f"{cfg['name']}: formulations A and B disagree: logits {d_logits:.3g}, "
                 f"states {d_states:.3g}")
    return d_logits, d_states


def sensitivity(cfg, w, seqs, refs):
    if cfg["arch"] == "granitehybrid":
        mutations = hybrid_mutations(cfg)
    else:
        mutations = [(what, change) for what, change, archs in MUTATIONS if cfg["arch"] in archs]
    report = {}
    for what, change in mutations:
        mcfg = dict(cfg, **change)
        excess = min(gm.max_excess(forward_a(mcfg, w, [s])[0][0], r) for s, r in zip(seqs, refs))
        if not excess >= LEAST_EXCESS:
            sys.exit(f"{cfg['name']}: fixture is not sensitive to '{what}' (excess {excess:.3g})")
        report[what] = round(excess, 1)
    return report


def scale_stats(cfg, w, tokens):
    """How each layer's mixer is scaled, on one sequence: the rms of the state term of y
    (sum_n s C) over that of the D skip, the share of the mixer output that comes from earlier
    tokens (its rms change when the state is reset at every token) and |mixer out| / |residual|."""
    mixer = mamba_mixer_a if cfg["arch"] == "mamba" else mamba2_mixer_a
    rms = lambda v: float(v.pow(2).mean().sqrt())  # noqa: E731
    x = w["tok_embd"][torch.as_tensor([tokens])]
    stats = {"state_over_d_term": [], "memory_share": [], "mixer_over_residual": []}
    for L in w["layers"]:
        h = rms_norm_a(x, L["attn_norm"], cfg["norm_eps"])
        out = mixer(cfg, L, h)[0]
        state_only = mixer(dict(cfg, use_d=False), L, h)[0]
        local = mixer(dict(cfg, recurrence=False), L, h)[0]
        stats["state_over_d_term"].append(round(rms(state_only) / rms(out - state_only), 3))
        stats["memory_share"].append(round(rms(out - local) / rms(out), 3))
        stats["mixer_over_residual"].append(round(rms(out) / rms(x), 3))
        x = x + out
    return stats


def hybrid_scale_stats(cfg, w, tokens):
    """scale_stats for granitehybrid, per layer (None where a figure does not apply): for the
    recurrent layers the same three figures, for the attention layers the share of the attention
    output that comes from earlier tokens (its rms change when each query sees only its own key)
    and |attention out| / |residual|; for every layer |FFN out| / |residual before the FFN|; and
    how much the attention layers move the logits (their rms change when every attn_output is
    zeroed, over rms logits)."""
    rms = lambda v: float(v.pow(2).mean().sqrt())  # noqa: E731
    eps = cfg["norm_eps"]
    x = w["tok_embd"][torch.as_tensor([tokens])]
    n = cfg["n_layers"]
    stats = {"layer_kinds": cfg["layer_kinds"], "state_over_d_term": [None] * n,
             "memory_share": [None] * n, "mixer_over_residual": [None] * n,
             "ffn_over_residual": [None] * n}
    for i, (kind, L) in enumerate(zip(cfg["layer_kinds"], w["layers"])):
        h = rms_norm_a(x, L["attn_norm"], eps)
        if kind == "attn":
            out = attention_a(cfg, L, h)
            local = attention_a(dict(cfg, attn_self_only=True), L, h)
        else:
            out = mamba2_mixer_a(cfg, L, h)[0]
            state_only = mamba2_mixer_a(dict(cfg, use_d=False), L, h)[0]
            local = mamba2_mixer_a(dict(cfg, recurrence=False), L, h)[0]
            stats["state_over_d_term"][i] = round(rms(state_only) / rms(out - state_only), 3)
        stats["memory_share"][i] = round(rms(out - local) / rms(out), 3)
        stats["mixer_over_residual"][i] = round(rms(out) / rms(x), 3)
        x = x + out
        ffn = swiglu_a(L, rms_norm_a(x, L["ffn_norm"], eps))
        stats["ffn_over_residual"][i] = round(rms(ffn) / rms(x), 3)
        x = x + ffn
    logits = forward_a(cfg, w, [tokens])[0]
    no_attn = dict(w, layers=[dict(L, wo=torch.zeros_like(L["wo"])) if "wo" in L else L
                              for L in w["layers"]])
    change = rms(forward_a(cfg, no_attn, [tokens])[0] - logits) / rms(logits)
    stats["logit_change_without_attention"] = round(change, 3)
    return stats


def gradient_check(loss_of, params, rng, per_tensor=2, h=1e-5):
    """Central differences on a few elements of every tensor against autograd's gradients."""
    worst = 0.0
    with torch.no_grad():
        for name, p, g in params:
            for _ in range(per_tensor):
                i = tuple(int(rng.integers(0, n)) for n in p.shape)
                old = p[i].item()
                p[i] = old + h
                up = loss_of().item()
                p[i] = old - h
                down = loss_of().item()
                p[i] = old
                fd = (up - down) / (2 * h)
                err = abs(fd - g[i].item()) / (1e-6 + abs(g[i].item()))
                if err > 1e-4:
                    sys.exit(f"gradient of {name}{list(i)}: autograd {g[i].item():.9g}, "
                             f"central difference {fd:.9g}")
                worst = max(worst, err)
    return worst


# --------------------------------------------------------------------------------------------
# Cases.
# --------------------------------------------------------------------------------------------

def flat(t):
    return [float("%.9g" % v) for v in t.reshape(-1).tolist()]


def run_model_case(cfg, seed, out_dir, generator):
    rng = np.random.default_rng(seed)
    w = make_weights(cfg, rng)
    seqs = [rng.integers(0, cfg["n_vocab"], n).tolist() for n in cfg["seq_lens"]]
    seqs[1][-1] = cfg["n_vocab"] - 1  # the last row of the embedding table is used
    runs = [forward_a(cfg, w, [s]) for s in seqs]
    refs = [lg[0] for lg, _ in runs]
    d_logits, d_states = agreement(cfg, w, seqs)
    sens = sensitivity(cfg, w, seqs, refs)

    name = cfg["name"]
    gguf = build_gguf(cfg, w)
    lbin = gm.logits_bin(cfg["n_vocab"], seqs, [r.to(torch.float32).numpy() for r in refs])
    K, ch = cfg["d_conv"], cfg["conv_channels"]
    hybrid = cfg["arch"] == "granitehybrid"
    if cfg["arch"] == "mamba":
        ssm_layout = f"[d_inner {cfg['d_inner']}][d_state {cfg['d_state']}]"
    else:
        ssm_layout = (f"[n_head {cfg['n_head']}][{'ssm_' if hybrid else ''}head_dim "
                      f"{cfg['ssm_head_dim']}][d_state {cfg['d_state']}]")
    if hybrid:  # the recurrent layers only, each with its index
        layer_states = [{"layer": i, "conv": flat(st[0][0]), "ssm": flat(st[1][0])}
                        for i, st in enumerate(runs[0][1]) if st is not None]
    else:
        layer_states = [{"conv": flat(conv[0]), "ssm": flat(ssm[0])} for conv, ssm in runs[0][1]]
    states = {
        "sequence": 0,
        "after_tokens": len(seqs[0]),
        "conv_layout": f"[d_conv-1 {K - 1}][channels {ch}] row-major, oldest token first: the "
                       "inputs of the convolution (" +
                       ("x, the first d_inner outputs of ssm_in" if cfg["arch"] == "mamba" else
                        "xBC = x, B, C, the d_inner + 2*n_group*d_state outputs of ssm_in after "
                        "z") + ") of the last d_conv-1 tokens, before the conv and its bias",
        "ssm_layout": ssm_layout + " row-major",
        "layers": layer_states,
    }
    if hybrid:
        keys = ["arch", "n_vocab", "n_ctx", "dim", "n_layers", "n_heads", "n_kv_heads",
                "head_dim", "ffn_dim", "layer_kinds", "rope", "rope_base", "d_inner", "d_state",
                "d_conv", "n_head", "ssm_head_dim", "n_group", "norm_eps", "tied"]
    else:
        keys = ["arch", "n_vocab", "n_ctx", "dim", "n_layers", "d_inner", "d_state", "d_conv"]
        keys += ["dt_rank"] if cfg["arch"] == "mamba" else ["n_head", "head_dim", "n_group"]
        keys += ["norm_eps", "tied"]
    desc = {
        "name": name,
        "checks": cfg["checks"],
        "config": {k: cfg[k] for k in keys},
        "gguf": name + ".gguf",
        "gguf_sha256": hashlib.sha256(gguf).hexdigest(),
        "logits": name + ".logits.bin",
        "logits_sha256": hashlib.sha256(lbin).hexdigest(),
        "logits_format": gm.LOGITS_FORMAT,
        "n_params": gm.n_params(w),
        "tokens": seqs,
        "max_abs_logit": round(max(float(r.abs().max()) for r in refs), 4),
        "formulations_max_abs_diff": {"logits": float("%.3g" % d_logits),
                                      "final_states": float("%.3g" % d_states)},
        "scale": (hybrid_scale_stats if hybrid else scale_stats)(cfg, w, seqs[1]),
        "mutation_excess_over_f32_tolerance": sens,
        "final_state": states,
        "generator": generator,
    }
    if cfg["arch"] != "mamba":
        desc["config"]["reference_chunk_len"] = cfg["chunk"]
    write(os.path.join(out_dir, name + ".gguf"), gguf)
    write(os.path.join(out_dir, name + ".logits.bin"), lbin)
    write(os.path.join(out_dir, name + ".json"),
          (json.dumps(desc, indent=1) + "\n").encode())
    print(f"{name:18s} gguf {len(gguf):7d} B  logits {len(lbin):6d} B  "
          f"max|logit| {desc['max_abs_logit']:6.3f}  A-B: logits {d_logits:.2e}, states "
          f"{d_states:.2e}  scale {desc['scale']}")
    print(f"{'':18s} mutation excess: " + ", ".join(f"{k} {v:.0f}" for k, v in sens.items()))


def loss_fn(cfg, w, tokens, targets):
    logits, _ = forward_a(cfg, w, tokens)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["n_vocab"]),
                                             torch.as_tensor(targets.reshape(-1),
                                                             dtype=torch.long))


def run_train_case(cfg, out_dir):
    rng = np.random.default_rng(cfg["seed"])
    w = make_weights(cfg, rng)
    gguf = build_gguf(cfg, w)
    B, T = cfg["batch"], cfg["seq"]
    tokens, targets = gt.random_batch(rng, cfg["n_vocab"], B, T)
    d_logits, d_states = agreement(cfg, w, [list(row) for row in tokens])

    params = named_params(cfg, w)
    loss, grads = gt.gradients(params, lambda: loss_fn(cfg, w, tokens, targets))
    fd_err = gradient_check(lambda: loss_fn(cfg, w, tokens, targets),
                            [(n, p, g) for (n, p), (_, g) in zip(params, grads)],
                            np.random.default_rng(cfg["seed"] + 1))

    # The AdamW trajectory and reference file of gen_train_fixtures (its hyper-parameters).
    losses = gt.adamw_losses(params, lambda: loss_fn(cfg, w, tokens, targets), loss)
    ref = gt.reference_gguf(B, T, tokens, targets, loss.item(), grads, losses)
    refb = ref.serialize()
    write(os.path.join(out_dir, cfg["name"] + ".gguf"), gguf)
    write(os.path.join(out_dir, cfg["name"] + ".ref.gguf"), refb)
    print(f"{cfg['name']:18s} gguf {len(gguf):7d} B  ref {len(refb):7d} B  loss {loss.item():.6f}"
          f" -> {losses[-1]:.6f} after {gt.OPT['steps']} steps, {sum(p.numel() for _, p in params)} "
          f"params  A-B: logits {d_logits:.2e}, states {d_states:.2e}  worst central-difference "
          f"rel. error {fd_err:.1e}")


def write(path, data):
    with open(path, "wb") as fh:
        fh.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    ap.add_argument("--seed", type=int, default=20240611,
                    help="seed of the inference cases (the training cases have their own, as in "
                         "gen_train_fixtures.py)")
    ap.add_argument("--models-out", default=os.path.join(REPO, "tests", "fixtures", "models"))
    ap.add_argument("--train-out", default=os.path.join(REPO, "tests", "fixtures", "train"))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)  # tiny tensors; also keeps the output independent of the machine

    names = [c["name"] for c in CASES]
    unknown = [n for n in args.cases if n not in names]
    if unknown:
        sys.exit("gen_ssm_fixtures.py: no case named " + " ".join(unknown))
    for index, case in enumerate(CASES):
        if args.cases and case["name"] not in args.cases:
            continue
        cfg = full_config(case)
        if cfg["kind"] == "model":
            os.makedirs(args.models_out, exist_ok=True)
            run_model_case(cfg, args.seed + 1000 * index, args.models_out,
                           "/usr/bin/python3 scripts/gen_ssm_fixtures.py --seed %d" % args.seed)
        else:
            os.makedirs(args.train_out, exist_ok=True)
            run_train_case(cfg, args.train_out)


if __name__ == "__main__":
    main()
