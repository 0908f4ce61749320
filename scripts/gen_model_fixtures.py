#!/usr/bin/python3
"""Golden fixtures for the forward pass: tiny random-weight llama / qwen2 / qwen3 / gpt2 models
written as GGUF files, with PyTorch reference logits for two token sequences each.

Run with Debian's python (torch + numpy, nothing else, no network):

    /usr/bin/python3 scripts/gen_model_fixtures.py            # writes tests/fixtures/models/

The architectures are implemented here from their definitions (not copied from any codebase), in
float64, twice: formulation A is batched torch code (rotate-half RoPE on permuted dims, mask
matrix, repeat-interleaved K/V heads), formulation B is a token-by-token numpy loop with an
explicit KV cache (RoPE as complex multiplication, per-head loops). The script refuses to write
anything unless A and B agree to 1e-9, every fixture is sensitive to its conventions (flipping
the RoPE style, the window, the GQA head mapping, ... changes the logits far beyond the test
tolerance) and, when ../shared/models/stories260K.bin is present, formulation A run on that real
llama2.c checkpoint greedily reproduces its published sample text.

Files per case NAME (see tests/fixtures/models/README.md):
  NAME.gguf        GGUF v3, F32 weights, llama.cpp metadata keys and tensor names
  NAME.logits.bin  "NXLG" header, token ids, float32 reference logits of every position
  NAME.json        the case's configuration, tokens and the file format in words
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np
import torch

# --------------------------------------------------------------------------------------------
# Cases. head_dim defaults to dim / n_heads; rope_dim to head_dim. Every case keeps the K/V row
# width (n_kv_heads * head_dim) a multiple of 32 so a Q8_0 KV cache can hold it. gqa_map, gelu
# and qkv_order are only changed by the self-check's deliberate mistakes (see mutations()).
# --------------------------------------------------------------------------------------------

BASE = dict(n_ctx=64, n_layers=2, dim=64, rope_base=10000.0, rope="normal", norm="rms",
            norm_eps=1e-5, ffn="swiglu", qkv_bias=False, qk_norm=False, pos_embd=False,
            window=0, tied=False, ffn_gain=1.0, gqa_map="interleave", gelu="tanh", qkv_order="qkv",
            seq_lens=(9, 13))

CASES = [
    dict(name="llama_gqa_tied", arch="llama", n_vocab=96, n_heads=8, n_kv_heads=4, ffn_dim=100,
         tied=True,
         checks="llama, GQA 8 query heads / 4 KV heads (head_dim 8), adjacent-pair RoPE base 1e4, "
                "tied output (no output.weight), RMSNorm 1e-5, SwiGLU with ffn 100 (not a "
                "multiple of 32)"),
    dict(name="llama_untied", arch="llama", n_vocab=112, n_heads=4, n_kv_heads=4, ffn_dim=72,
         rope_base=500000.0,
         checks="llama, MHA (4 heads = 4 KV heads, head_dim 16), separate output.weight, RoPE base "
                "5e5, ffn 72"),
    dict(name="qwen2", arch="qwen2", n_vocab=112, n_heads=4, n_kv_heads=2, ffn_dim=136,
         qkv_bias=True, rope="neox", rope_base=1000000.0, norm_eps=1e-6,
         checks="qwen2: q/k/v biases, NeoX RoPE (halves) base 1e6, GQA 4/2 (head_dim 16), RMSNorm "
                "1e-6, untied, ffn 136"),
    dict(name="qwen3", arch="qwen3", n_vocab=104, n_heads=4, n_kv_heads=2, head_dim=32,
         ffn_dim=88, qk_norm=True, rope="neox", rope_base=1000000.0, norm_eps=1e-6, tied=True,
         checks="qwen3: per-head RMSNorm of q and k (weights of head_dim) before RoPE, head_dim 32 "
                "> dim/heads = 16 (attention width 128 != dim 64, key_length/value_length "
                "metadata), GQA 4/2, NeoX RoPE base 1e6, no biases, tied, ffn 88"),
    dict(name="gpt2", arch="gpt2", n_vocab=100, n_heads=4, n_kv_heads=4, ffn_dim=144,
         norm="layer", ffn="gelu", qkv_bias=True, pos_embd=True, rope="none", tied=True,
         ffn_gain=2.5,
         checks="gpt2: learned positions, LayerNorm 1e-5 with bias, fused qkv (+bias), tanh GELU, "
                "biases on every linear, tied output, ffn 144"),
    dict(name="llama_swa", arch="llama", n_vocab=96, n_heads=4, n_kv_heads=2, ffn_dim=100,
         window=4,
         checks="llama with a sliding window of 4 (key j visible from query i iff i-4 < j <= i), "
                "GQA 4/2 (head_dim 16), untied; both sequences are longer than the window"),
]


def full_config(case):
    cfg = dict(BASE)
    cfg.update(case)
    cfg.setdefault("head_dim", cfg["dim"] // cfg["n_heads"])
    cfg.setdefault("rope_dim", cfg["head_dim"] if cfg["rope"] != "none" else 0)
    return cfg


# --------------------------------------------------------------------------------------------
# Weights: generated in float64, rounded to float32 once (the GGUF holds float32), then used in
# float64 so the reference sees exactly the stored values.
# --------------------------------------------------------------------------------------------

def make_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    d, hd, f = cfg["dim"], cfg["head_dim"], cfg["ffn_dim"]
    qd, kvd = cfg["n_heads"] * hd, cfg["n_kv_heads"] * hd

    def t(a):
        return torch.from_numpy(a.astype(np.float32).astype(np.float64))

    def normal(shape, std):
        return t(rng.standard_normal(shape) * std)

    def linear(n_out, n_in, gain=1.0):  # torch layout (out, in): y = x W^T
        return normal((n_out, n_in), gain / math.sqrt(n_in))

    def norm_w(n):
        return t(1.0 + 0.15 * rng.standard_normal(n))

    w = {"tok_embd": normal((cfg["n_vocab"], d), 0.25), "layers": []}
    if cfg["pos_embd"]:
        w["pos_embd"] = normal((cfg["n_ctx"], d), 0.25)
    layer_norm = cfg["norm"] == "layer"
    for _ in range(cfg["n_layers"]):
        L = {"attn_norm": norm_w(d)}
        if layer_norm:
            L["attn_norm_b"] = normal(d, 0.1)
        if cfg["arch"] == "gpt2":  # fused q, k, v rows
            L["wqkv"] = torch.cat([linear(qd, d, 1.5), linear(kvd, d, 1.5), linear(kvd, d)])
            L["bqkv"] = normal(qd + 2 * kvd, 0.1)
        else:
            L["wq"], L["wk"], L["wv"] = linear(qd, d, 1.5), linear(kvd, d, 1.5), linear(kvd, d)
            if cfg["qkv_bias"]:
                L["bq"], L["bk"], L["bv"] = normal(qd, 0.1), normal(kvd, 0.1), normal(kvd, 0.1)
        L["wo"] = linear(d, qd)
        if cfg["arch"] == "gpt2":
            L["bo"] = normal(d, 0.1)
        if cfg["qk_norm"]:
            L["q_norm"], L["k_norm"] = norm_w(hd), norm_w(hd)
        L["ffn_norm"] = norm_w(d)
        if layer_norm:
            L["ffn_norm_b"] = normal(d, 0.1)
        if cfg["ffn"] == "swiglu":
            L["w_gate"], L["w_up"], L["w_down"] = linear(f, d), linear(f, d), linear(d, f)
        else:
            # ffn_gain spreads the pre-activations over the range where GELU variants differ
            L["w_up"], L["b_up"] = linear(f, d, cfg["ffn_gain"]), normal(f, 0.1)
            L["w_down"], L["b_down"] = linear(d, f), normal(d, 0.1)
        w["layers"].append(L)
    w["out_norm"] = norm_w(d)
    if layer_norm:
        w["out_norm_b"] = normal(d, 0.1)
    w["output"] = w["tok_embd"] if cfg["tied"] else linear(cfg["n_vocab"], d, 2.0)
    return w


def split_qkv(cfg, L):
    """(wq, wk, wv, bq, bk, bv) of a layer; gpt2's fused rows are q, k, v in that order."""
    if "wqkv" not in L:
        return L["wq"], L["wk"], L["wv"], L.get("bq"), L.get("bk"), L.get("bv")
    qd, kvd = cfg["n_heads"] * cfg["head_dim"], cfg["n_kv_heads"] * cfg["head_dim"]
    sizes = {"q": qd, "k": kvd, "v": kvd}
    order = cfg["qkv_order"]  # a mutation may read the fused rows in the wrong order
    offs, o = {}, 0
    for c in order:
        offs[c] = (o, o + sizes[c])
        o += sizes[c]
    W = [L["wqkv"][offs[c][0]:offs[c][1]] for c in "qkv"]
    B = [L["bqkv"][offs[c][0]:offs[c][1]] for c in "qkv"]
    return W[0], W[1], W[2], B[0], B[1], B[2]


# --------------------------------------------------------------------------------------------
# Formulation A: batched torch (float64).
# --------------------------------------------------------------------------------------------

def rms_norm_a(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def layer_norm_a(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_a(x, kind):
    if kind == "tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def rope_a(x, pos, cfg):
    """x: (T, H, head_dim). Rotate-half on a permuted view: for the adjacent-pair style the pairs
    (2i, 2i+1) are first gathered into halves (i, i + n/2), the layout NeoX rotates directly."""
    if cfg["rope"] == "none":
        return x
    n = cfg["rope_dim"]
    half = n // 2
    if cfg["rope"] == "normal":
        perm = torch.cat([torch.arange(0, n, 2), torch.arange(1, n, 2)])
    else:
        perm = torch.arange(n)
    inv = torch.argsort(perm)
    theta = cfg["rope_base"] ** (-torch.arange(half, dtype=torch.float64) * 2.0 / n)
    ang = pos.to(torch.float64)[:, None] * theta[None, :]                  # (T, half)
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    r = x[..., :n][..., perm]
    rot = torch.cat([-r[..., half:], r[..., :half]], -1)
    r = r * cos + rot * sin
    return torch.cat([r[..., inv], x[..., n:]], -1)


def quantize_kv(x, kind):
    """Rounds K or V rows (T, n_kv*head_dim) as a cache of `kind` would store them."""
    if kind in (None, "f32"):
        return x
    if kind == "f16":
        return x.to(torch.float32).to(torch.float16).to(torch.float64)
    if kind == "q8_0":  # ggml block_q8_0: 32 values, scale d = amax/127 stored as f16
        T, n = x.shape
        b = x.to(torch.float32).reshape(T, n // 32, 32)
        d = b.abs().amax(-1, keepdim=True) / 127.0
        inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
        q = torch.round(b * inv).clamp(-127, 127)
        d16 = d.to(torch.float16).to(torch.float32)
        return (q * d16).reshape(T, n).to(torch.float64)
    raise ValueError(kind)


def forward_a(cfg, w, tokens, kv_kind=None):
    """Logits (T, n_vocab) of one sequence at positions 0..T-1."""
    T = len(tokens)
    H, KV, hd = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    tok = torch.tensor(tokens, dtype=torch.long)
    pos = torch.arange(T)
    x = w["tok_embd"][tok]
    if cfg["pos_embd"]:
        x = x + w["pos_embd"][pos]

    def norm(x, wt, b):
        if cfg["norm"] == "rms":
            return rms_norm_a(x, wt, cfg["norm_eps"])
        return layer_norm_a(x, wt, b, cfg["norm_eps"])

    i, j = pos[:, None], pos[None, :]
    visible = j <= i
    if cfg["window"]:
        visible = visible & (i - j < cfg["window"])
    for L in w["layers"]:
        h = norm(x, L["attn_norm"], L.get("attn_norm_b"))
        wq, wk, wv, bq, bk, bv = split_qkv(cfg, L)
        q, k, v = h @ wq.T, h @ wk.T, h @ wv.T
        if bq is not None:
            q, k, v = q + bq, k + bk, v + bv
        q, k, v = q.view(T, H, hd), k.view(T, KV, hd), v.view(T, KV, hd)
        if cfg["qk_norm"]:
            q = rms_norm_a(q, L["q_norm"], cfg["norm_eps"])
            k = rms_norm_a(k, L["k_norm"], cfg["norm_eps"])
        q, k = rope_a(q, pos, cfg), rope_a(k, pos, cfg)
        k = quantize_kv(k.reshape(T, KV * hd), kv_kind).view(T, KV, hd)
        v = quantize_kv(v.reshape(T, KV * hd), kv_kind).view(T, KV, hd)
        if cfg["gqa_map"] == "interleave":  # query head h reads KV head h // (H / KV)
            k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        else:                               # wrong on purpose (mutation): h % KV
            k, v = k.repeat(1, H // KV, 1), v.repeat(1, H // KV, 1)
        s = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(hd)
        s = s.masked_fill(~visible[None], float("-inf"))
        a = torch.einsum("hij,jhd->ihd", torch.softmax(s, -1), v).reshape(T, H * hd)
        x = x + a @ L["wo"].T + (L["bo"] if "bo" in L else 0.0)
        h = norm(x, L["ffn_norm"], L.get("ffn_norm_b"))
        if cfg["ffn"] == "swiglu":
            g = h @ L["w_gate"].T
            m = (g * torch.sigmoid(g)) * (h @ L["w_up"].T)
            x = x + m @ L["w_down"].T
        else:
            m = gelu_a(h @ L["w_up"].T + L["b_up"], cfg["gelu"])
            x = x + m @ L["w_down"].T + L["b_down"]
    x = norm(x, w["out_norm"], w.get("out_norm_b"))
    return x @ w["output"].T


# --------------------------------------------------------------------------------------------
# Formulation B: numpy, one token at a time with an explicit KV cache, complex-number RoPE,
# torch's own GELU / LayerNorm where they exist.
# --------------------------------------------------------------------------------------------

def rope_b(x, p, cfg):
    """x: (H, head_dim) at position p; pairs are complex numbers multiplied by e^(i p theta)."""
    if cfg["rope"] == "none":
        return x
    n = cfg["rope_dim"]
    half = n // 2
    theta = cfg["rope_base"] ** (-(2.0 * np.arange(half)) / n)
    rot = np.exp(1j * p * theta)
    y = x.copy()
    if cfg["rope"] == "normal":
        c = (x[:, 0:n:2] + 1j * x[:, 1:n:2]) * rot
        y[:, 0:n:2], y[:, 1:n:2] = c.real, c.imag
    else:
        c = (x[:, :half] + 1j * x[:, half:n]) * rot
        y[:, :half], y[:, half:n] = c.real, c.imag
    return y


def forward_b(cfg, w, tokens):
    H, KV, hd, eps = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["norm_eps"]
    N = lambda t: None if t is None else t.numpy()  # noqa: E731
    layers = []
    for L in w["layers"]:
        wq, wk, wv, bq, bk, bv = split_qkv(cfg, L)
        layers.append({k: N(v) for k, v in L.items()} |
                      dict(wq=N(wq), wk=N(wk), wv=N(wv), bq=N(bq), bk=N(bk), bv=N(bv)))
    cache = [([], []) for _ in layers]

    def rms(x, wt):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * wt

    def norm(x, wt, b):
        if cfg["norm"] == "rms":
            return rms(x, wt)
        t = torch.nn.functional.layer_norm(torch.from_numpy(x), (x.shape[-1],),
                                           torch.from_numpy(wt), torch.from_numpy(b), eps)
        return t.numpy()

    out = []
    for p, tok in enumerate(tokens):
        x = w["tok_embd"][tok].numpy().copy()
        if cfg["pos_embd"]:
            x += w["pos_embd"][p].numpy()
        for li, L in enumerate(layers):
            h = norm(x, L["attn_norm"], L.get("attn_norm_b"))
            q, k, v = L["wq"] @ h, L["wk"] @ h, L["wv"] @ h
            if L["bq"] is not None:
                q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
            q, k, v = q.reshape(H, hd), k.reshape(KV, hd), v.reshape(KV, hd)
            if cfg["qk_norm"]:
                q, k = rms(q, L["q_norm"]), rms(k, L["k_norm"])
            q, k = rope_b(q, p, cfg), rope_b(k, p, cfg)
            ks, vs = cache[li]
            ks.append(k)
            vs.append(v)
            lo = max(0, p - cfg["window"] + 1) if cfg["window"] else 0
            att = np.zeros((H, hd))
            for hh in range(H):
                g = hh // (H // KV)
                s = np.array([q[hh] @ ks[j][g] for j in range(lo, p + 1)]) / math.sqrt(hd)
                e = np.exp(s - s.max())
                e /= e.sum()
                att[hh] = sum(e[j - lo] * vs[j][g] for j in range(lo, p + 1))
            x = x + L["wo"] @ att.reshape(-1) + (L["bo"] if "bo" in L else 0.0)
            h = norm(x, L["ffn_norm"], L.get("ffn_norm_b"))
            if cfg["ffn"] == "swiglu":
                m = torch.nn.functional.silu(torch.from_numpy(L["w_gate"] @ h)).numpy()
                x = x + L["w_down"] @ (m * (L["w_up"] @ h))
            else:
                u = torch.from_numpy(L["w_up"] @ h + L["b_up"])
                m = torch.nn.functional.gelu(u, approximate="tanh").numpy()
                x = x + L["w_down"] @ m + L["b_down"]
        x = norm(x, w["out_norm"].numpy(), N(w.get("out_norm_b")))
        out.append(w["output"].numpy() @ x)
    return np.stack(out)


# --------------------------------------------------------------------------------------------
# GGUF v3 writer (little-endian, alignment 32). Tensor dims are written innermost first, so a
# torch (out, in) matrix is stored with dims [in, out] and the same row-major bytes.
# --------------------------------------------------------------------------------------------

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32 = 0
ALIGN = 32


class GgufWriter:
    def __init__(self):
        self.kv = []       # (key, type, value, array element type or None)
        self.tensors = []  # (name, float32 ndarray)

    def add(self, key, gtype, value):
        self.kv.append((key, gtype, value, None))

    def add_array(self, key, elem_type, values):
        self.kv.append((key, GGUF_ARRAY, list(values), elem_type))

    def add_tensor(self, name, t):
        self.tensors.append((name, np.ascontiguousarray(t.numpy().astype(np.float32))))

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    @classmethod
    def _scalar(cls, gtype, v):
        if gtype == GGUF_U32:
            return struct.pack("<I", v)
        if gtype == GGUF_I32:
            return struct.pack("<i", v)
        if gtype == GGUF_F32:
            return struct.pack("<f", v)
        if gtype == GGUF_BOOL:
            return struct.pack("<B", 1 if v else 0)
        if gtype == GGUF_STRING:
            return cls._str(v)
        raise ValueError(gtype)

    def serialize(self):
        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, gtype, value, elem in self.kv:
            out += self._str(key) + struct.pack("<I", gtype)
            if gtype == GGUF_ARRAY:
                out += struct.pack("<IQ", elem, len(value))
                for v in value:
                    out += self._scalar(elem, v)
            else:
                out += self._scalar(gtype, value)
        offset = 0
        for name, a in self.tensors:
            out += self._str(name) + struct.pack("<I", a.ndim)
            for dim in reversed(a.shape):  # innermost first
                out += struct.pack("<Q", dim)
            out += struct.pack("<IQ", GGML_F32, offset)
            offset += (a.nbytes + ALIGN - 1) // ALIGN * ALIGN
        out += bytes(-len(out) % ALIGN)
        for _, a in self.tensors:
            out += a.tobytes()
            out += bytes(-len(out) % ALIGN)
        return bytes(out)


def byte_level_pieces(V):
    """The byte-level fixtures' V - 1 ordinary tokens: printable ASCII, which byte-level BPE maps
    to itself, then merges of letter pairs (the end-of-text token takes the last id)."""
    chars = [chr(c) for c in range(33, 127)]
    merged = []
    for a in "thaeinors":
        for b in "ehnrst":
            if len(chars) + len(merged) < V - 1 and a != b:
                merged.append(a + b)
    return (chars + merged)[:V - 1]


def add_vocab(gw, cfg):
    """A small self-describing vocabulary; the tests feed token ids directly."""
    V = cfg["n_vocab"]
    if cfg["arch"] == "llama":  # SentencePiece style: <unk> <s> </s> then word pieces
        pieces = ["<unk>", "<s>", "</s>"]
        letters = "abcdefghijklmnopqrstuvwxyz"
        for i in range(V - 3):
            a, b = divmod(i, 26)
            pieces.append(("\u2581" if a % 2 == 0 else "") + letters[b] * (a // 2 + 1))
        gw.add("tokenizer.ggml.model", GGUF_STRING, "llama")
        gw.add_array("tokenizer.ggml.tokens", GGUF_STRING, pieces)
        gw.add_array("tokenizer.ggml.scores", GGUF_F32, [-float(i) for i in range(V)])
        gw.add_array("tokenizer.ggml.token_type", GGUF_I32, [2, 3, 3] + [1] * (V - 3))
        gw.add("tokenizer.ggml.bos_token_id", GGUF_U32, 1)
        gw.add("tokenizer.ggml.eos_token_id", GGUF_U32, 2)
        gw.add("tokenizer.ggml.unknown_token_id", GGUF_U32, 0)
        return
    # Byte-level BPE style: printable ASCII, a few merges of them, one end-of-text control token.
    pieces = byte_level_pieces(V)
    merges = [f"{m[0]} {m[1]}" for m in pieces if len(m) == 2]
    eot = "<|endoftext|>"
    gw.add("tokenizer.ggml.model", GGUF_STRING, "gpt2")
    gw.add("tokenizer.ggml.pre", GGUF_STRING, "gpt-2" if cfg["arch"] == "gpt2" else "qwen2")
    gw.add_array("tokenizer.ggml.tokens", GGUF_STRING, pieces + [eot])
    gw.add_array("tokenizer.ggml.token_type", GGUF_I32, [1] * (V - 1) + [3])
    gw.add_array("tokenizer.ggml.merges", GGUF_STRING, merges)
    gw.add("tokenizer.ggml.bos_token_id", GGUF_U32, V - 1)
    gw.add("tokenizer.ggml.eos_token_id", GGUF_U32, V - 1)


def build_gguf(cfg, w):
    a = cfg["arch"]
    gw = GgufWriter()
    gw.add("general.architecture", GGUF_STRING, a)
    gw.add("general.name", GGUF_STRING, "nexus-fixture-" + cfg["name"])
    gw.add("general.file_type", GGUF_U32, 0)  # all F32
    gw.add(f"{a}.context_length", GGUF_U32, cfg["n_ctx"])
    gw.add(f"{a}.embedding_length", GGUF_U32, cfg["dim"])
    gw.add(f"{a}.block_count", GGUF_U32, cfg["n_layers"])
    gw.add(f"{a}.feed_forward_length", GGUF_U32, cfg["ffn_dim"])
    gw.add(f"{a}.attention.head_count", GGUF_U32, cfg["n_heads"])
    if a != "gpt2":  # llama.cpp's gpt2 files carry no head_count_kv (it defaults to head_count)
        gw.add(f"{a}.attention.head_count_kv", GGUF_U32, cfg["n_kv_heads"])
    if cfg["head_dim"] * cfg["n_heads"] != cfg["dim"]:
        gw.add(f"{a}.attention.key_length", GGUF_U32, cfg["head_dim"])
        gw.add(f"{a}.attention.value_length", GGUF_U32, cfg["head_dim"])
    if cfg["rope"] != "none":
        gw.add(f"{a}.rope.freq_base", GGUF_F32, cfg["rope_base"])
        gw.add(f"{a}.rope.dimension_count", GGUF_U32, cfg["rope_dim"])
    if cfg["norm"] == "rms":
        gw.add(f"{a}.attention.layer_norm_rms_epsilon", GGUF_F32, cfg["norm_eps"])
    else:
        gw.add(f"{a}.attention.layer_norm_epsilon", GGUF_F32, cfg["norm_eps"])
    if cfg["window"]:
        gw.add(f"{a}.attention.sliding_window", GGUF_U32, cfg["window"])
    add_vocab(gw, cfg)

    gw.add_tensor("token_embd.weight", w["tok_embd"])
    if "pos_embd" in w:
        gw.add_tensor("position_embd.weight", w["pos_embd"])
    names = dict(attn_norm="attn_norm.weight", attn_norm_b="attn_norm.bias",
                 wq="attn_q.weight", bq="attn_q.bias", wk="attn_k.weight", bk="attn_k.bias",
                 wv="attn_v.weight", bv="attn_v.bias",
                 wqkv="attn_qkv.weight", bqkv="attn_qkv.bias",
                 q_norm="attn_q_norm.weight", k_norm="attn_k_norm.weight",
                 wo="attn_output.weight", bo="attn_output.bias",
                 ffn_norm="ffn_norm.weight", ffn_norm_b="ffn_norm.bias",
                 w_gate="ffn_gate.weight", w_up="ffn_up.weight", b_up="ffn_up.bias",
                 w_down="ffn_down.weight", b_down="ffn_down.bias")
    for i, L in enumerate(w["layers"]):
        for key, name in names.items():
            if key in L:
                gw.add_tensor(f"blk.{i}.{name}", L[key])
    gw.add_tensor("output_norm.weight", w["out_norm"])
    if "out_norm_b" in w:
        gw.add_tensor("output_norm.bias", w["out_norm_b"])
    if not cfg["tied"]:
        gw.add_tensor("output.weight", w["output"])
    return gw.serialize()


def n_params(w):
    """Elements of all stored tensors (a tied output is the embedding, counted once)."""
    seen, n = set(), 0
    for t in [w["tok_embd"], w.get("pos_embd"), w["out_norm"], w.get("out_norm_b"), w["output"]] + \
            [t for L in w["layers"] for t in L.values()]:
        if t is not None and id(t) not in seen:
            seen.add(id(t))
            n += t.numel()
    return n


# --------------------------------------------------------------------------------------------
# Reference logits file.
# --------------------------------------------------------------------------------------------

LOGITS_FORMAT = ("little-endian; char[4] magic 'NXLG'; int32 version (1); int32 n_vocab; "
                 "int32 n_seq; int32 len[n_seq]; int32 tokens of sequence 0, then of sequence 1, "
                 "...; float32 logits[sum(len)][n_vocab] in the same order (row r = logits after "
                 "token r of its sequence, at position r, each sequence processed on its own "
                 "from position 0)")


def logits_bin(n_vocab, seqs, logits):
    out = bytearray(b"NXLG")
    out += struct.pack("<iii", 1, n_vocab, len(seqs))
    out += struct.pack(f"<{len(seqs)}i", *[len(s) for s in seqs])
    for s in seqs:
        out += struct.pack(f"<{len(s)}i", *s)
    for lg in logits:
        out += np.ascontiguousarray(lg, dtype="<f4").tobytes()
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Self-checks.
# --------------------------------------------------------------------------------------------

ABS_TOL, REL_TOL = 1e-4, 1e-5  # the C++ golden test's F32 tolerance


def mutations(cfg):
    """Convention mistakes an implementation could make, each of which the fixture must catch:
    (what, config change, least acceptable max_excess; default 100)."""
    m = []
    if cfg["rope"] != "none":
        m.append(("rope style flipped", dict(rope="neox" if cfg["rope"] == "normal" else "normal")))
        m.append(("rope base 1e4" if cfg["rope_base"] != 1e4 else "rope base 1e6",
                  dict(rope_base=1e4 if cfg["rope_base"] != 1e4 else 1e6)))
    if cfg["n_kv_heads"] != cfg["n_heads"]:
        m.append(("GQA head h -> KV head h % n_kv", dict(gqa_map="tile")))
    if cfg["window"]:
        m.append(("sliding window ignored", dict(window=0)))
        m.append(("window off by one", dict(window=cfg["window"] + 1)))
    if cfg["qk_norm"]:
        m.append(("no q/k norm", dict(qk_norm=False)))
    if cfg["ffn"] == "gelu":
        m.append(("erf GELU instead of tanh", dict(gelu="erf"), 5))
        m.append(("fused rows read as k,q,v", dict(qkv_order="kqv")))
    return m


def max_excess(got, ref):
    """Largest |got - ref| / (ABS_TOL + REL_TOL |ref|): <= 1 passes the C++ F32 check."""
    return float(((got - ref).abs() / (ABS_TOL + REL_TOL * ref.abs())).max())


def check_case(cfg, w, seqs, refs):
    report = {}
    for s, ref in zip(seqs, refs):
        b = torch.from_numpy(forward_b(cfg, w, s))
        err = float((b - ref).abs().max())
        if err > 1e-9:
            sys.exit(f"{cfg['name']}: formulations A and B disagree by {err:.3g}")
    for what, change, *least in mutations(cfg):
        mcfg = dict(cfg, **change)
        excess = min(max_excess(forward_a(mcfg, w, s), r) for s, r in zip(seqs, refs))
        if excess < (least[0] if least else 100):
            sys.exit(f"{cfg['name']}: fixture is not sensitive to '{what}' (excess {excess:.3g})")
        report[what] = round(excess, 1)
    # What a F16 / Q8_0 KV cache costs, relative to max|logit| (the looser C++ tolerance).
    scale = max(float(r.abs().max()) for r in refs)
    kv = {}
    for kind in ("f16", "q8_0"):
        kv[kind] = max(float((forward_a(cfg, w, s, kind) - r).abs().max())
                       for s, r in zip(seqs, refs)) / scale
    return report, kv


def check_stories260k(path, tok_path):
    """Formulation A on the real llama2.c stories260K checkpoint must reproduce its sample."""
    raw = open(path, "rb").read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    f = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
    hd = dim // n_heads
    o = 0

    def take(*shape):
        nonlocal o
        n = int(np.prod(shape))
        a = torch.from_numpy(f[o:o + n].reshape(shape).copy())
        o += n
        return a

    emb = take(vocab, dim)
    rms_att = take(n_layers, dim)
    wq, wk = take(n_layers, dim, dim), take(n_layers, n_kv * hd, dim)
    wv, wo = take(n_layers, n_kv * hd, dim), take(n_layers, dim, dim)
    rms_ffn = take(n_layers, dim)
    w1, w2 = take(n_layers, hidden, dim), take(n_layers, dim, hidden)
    w3 = take(n_layers, hidden, dim)
    rms_final = take(dim)
    take(seq_len, hd // 2)  # llama2.c's precomputed RoPE tables (real, imaginary): recomputed
    take(seq_len, hd // 2)
    out = emb if shared else take(vocab, dim)
    w = {"tok_embd": emb, "out_norm": rms_final, "output": out, "layers": [
        dict(attn_norm=rms_att[i], wq=wq[i], wk=wk[i], wv=wv[i], wo=wo[i], ffn_norm=rms_ffn[i],
             w_gate=w1[i], w_down=w2[i], w_up=w3[i]) for i in range(n_layers)]}
    cfg = full_config(dict(name="stories260K", arch="llama", n_vocab=vocab, dim=dim,
                           n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                           ffn_dim=hidden, n_ctx=seq_len))
    toks = [1]
    for _ in range(60):
        toks.append(int(forward_a(cfg, w, toks)[-1].argmax()))
    tr = open(tok_path, "rb").read()
    o = 4
    pieces = []
    for _ in range(vocab):
        _, n = struct.unpack_from("<fi", tr, o)
        pieces.append(tr[o + 8:o + 8 + n].decode("utf-8", "replace"))
        o += 8 + n
    text = "".join(pieces[t] for t in toks[1:]).lstrip()
    want = "Once upon a time, there was a little girl named Lily. She loved to play outside"
    if not text.startswith(want):
        sys.exit(f"stories260K greedy sample differs: {text!r}")
    return text


# --------------------------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "tests", "fixtures", "models"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(repo), "shared"),
                    help="../shared (for the stories260K check; skipped when absent)")
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)

    st = os.path.join(args.shared, "models", "stories260K.bin")
    tk = os.path.join(args.shared, "models", "tok512.bin")
    if os.path.exists(st) and os.path.exists(tk):
        print("stories260K (real llama2.c model, formulation A, greedy):",
              repr(check_stories260k(st, tk)[:90]))
    else:
        print("stories260K check skipped:", st, "not found")

    os.makedirs(args.out, exist_ok=True)
    for index, case in enumerate(CASES):
        cfg = full_config(case)
        w = make_weights(cfg, args.seed + 1000 * index)
        rng = np.random.default_rng(args.seed + 1000 * index + 1)
        seqs = [rng.integers(0, cfg["n_vocab"], n).tolist() for n in cfg["seq_lens"]]
        seqs[1][-1] = cfg["n_vocab"] - 1  # the last row of the embedding table is used
        refs = [forward_a(cfg, w, s) for s in seqs]
        sens, kv = check_case(cfg, w, seqs, refs)

        name = cfg["name"]
        gguf = build_gguf(cfg, w)
        lbin = logits_bin(cfg["n_vocab"], seqs, [r.to(torch.float32).numpy() for r in refs])
        with open(os.path.join(args.out, name + ".gguf"), "wb") as fh:
            fh.write(gguf)
        with open(os.path.join(args.out, name + ".logits.bin"), "wb") as fh:
            fh.write(lbin)
        keys = ["arch", "n_vocab", "n_ctx", "dim", "n_layers", "n_heads", "n_kv_heads",
                "head_dim", "ffn_dim", "norm_eps", "rope", "rope_base", "rope_dim", "window",
                "tied"]
        desc = {
            "name": name,
            "checks": cfg["checks"],
            "config": {k: cfg[k] for k in keys},
            "gguf": name + ".gguf",
            "gguf_sha256": hashlib.sha256(gguf).hexdigest(),
            "logits": name + ".logits.bin",
            "logits_sha256": hashlib.sha256(lbin).hexdigest(),
            "logits_format": LOGITS_FORMAT,
            "n_params": n_params(w),
            "tokens": seqs,
            "max_abs_logit": round(max(float(r.abs().max()) for r in refs), 4),
            "kv_cache_error_rel_to_max_logit": {k: float(f"{v:.3g}") for k, v in kv.items()},
            "mutation_excess_over_f32_tolerance": sens,
            "generator": "/usr/bin/python3 scripts/gen_model_fixtures.py --seed %d" % args.seed,
        }
        with open(os.path.join(args.out, name + ".json"), "w") as fh:
            json.dump(desc, fh, indent=1)
            fh.write("\n")
        print(f"{name:15s} gguf {len(gguf):7d} B  logits {len(lbin):6d} B  "
              f"max|logit| {desc['max_abs_logit']:6.3f}  kv err f16 {kv['f16']:.2e} "
              f"q8_0 {kv['q8_0']:.2e}  min mutation excess {min(sens.values()):.0f}")


if __name__ == "__main__":
    main()
