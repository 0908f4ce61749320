#!/usr/bin/python3
"""Reference logits and a greedy continuation for the real tiny GPT-2 checkpoint in
tests/fixtures/hf/lm_buddy_tiny_gpt2 (written by transformers 4.36 / the safetensors library in
mozilla-ai/lm-buddy; see the README there), for the tests of `nexus convert --hf`.

Run with Debian's python (torch + numpy, nothing else, no network):

    /usr/bin/python3 scripts/gen_hf_real_reference.py

It reads model.safetensors with the format's definition (u64 header length, JSON header, raw
little-endian data) independently of nexus, maps the HF GPT-2 weights to the math (Conv1D
computes x @ W + b with W stored [in, out]; the head is tied to wte because the checkpoint is a
GPT2Model), and runs gen_model_fixtures' two formulations of GPT-2 (batched torch, and a
token-by-token numpy loop with a KV cache) in float64; it stops unless they agree to 1e-9. Output,
beside the folder:

  lm_buddy_tiny_gpt2.logits.bin   the NXLG logits file of two token sequences (see
                                  tests/fixtures/models/README.md)
  lm_buddy_tiny_gpt2.json         the configuration, and the greedy continuation of a prompt
"""

import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_fixtures as gm  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(REPO, "tests", "fixtures", "hf", "lm_buddy_tiny_gpt2")
NAME = "lm_buddy_tiny_gpt2"


def read_safetensors(path):
    with open(path, "rb") as fh:
        raw = fh.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, f = e["data_offsets"]
        a = np.frombuffer(data[b:f], dtype="<f4").reshape(e["shape"])
        out[name] = torch.from_numpy(a.astype(np.float64))
    return out


def main():
    torch.set_default_dtype(torch.float64)
    with open(os.path.join(DIR, "config.json")) as fh:
        c = json.load(fh)
    t = read_safetensors(os.path.join(DIR, "model.safetensors"))
    d = c["n_embd"]
    cfg = gm.full_config(dict(
        name=NAME, arch="gpt2", n_vocab=c["vocab_size"], dim=d, n_layers=c["n_layer"],
        n_heads=c["n_head"], n_kv_heads=c["n_head"], ffn_dim=c["n_inner"] or 4 * d,
        n_ctx=c["n_positions"], norm="layer", norm_eps=c["layer_norm_epsilon"], ffn="gelu",
        qkv_bias=True, pos_embd=True, rope="none", tied=True))
    w = {"tok_embd": t["wte.weight"], "pos_embd": t["wpe.weight"], "layers": []}
    for i in range(cfg["n_layers"]):
        p = f"h.{i}."
        w["layers"].append({
            "attn_norm": t[p + "ln_1.weight"], "attn_norm_b": t[p + "ln_1.bias"],
            "wqkv": t[p + "attn.c_attn.weight"].T, "bqkv": t[p + "attn.c_attn.bias"],
            "wo": t[p + "attn.c_proj.weight"].T, "bo": t[p + "attn.c_proj.bias"],
            "ffn_norm": t[p + "ln_2.weight"], "ffn_norm_b": t[p + "ln_2.bias"],
            "w_up": t[p + "mlp.c_fc.weight"].T, "b_up": t[p + "mlp.c_fc.bias"],
            "w_down": t[p + "mlp.c_proj.weight"].T, "b_down": t[p + "mlp.c_proj.bias"]})
    w["out_norm"], w["out_norm_b"] = t["ln_f.weight"], t["ln_f.bias"]
    w["output"] = w["tok_embd"]

    # " lower newer" in this vocabulary (transformers' own GPT-2 tokenizer test), and a sequence
    # that reaches the last id.
    seqs = [[14, 15, 10, 9, 3, 2, 15], [20, 0, 1, 2, 16, 17, 18, 7, 8, 12, 19, 5, 20]]
    refs = []
    for s in seqs:
        a = gm.forward_a(cfg, w, s)
        b = torch.from_numpy(np.asarray(gm.forward_b(cfg, w, s)))
        err = float((a - b).abs().max())
        if err > 1e-9:
            sys.exit(f"formulations disagree on {s}: {err}")
        refs.append(a)

    prompt, greedy = [14, 15], []
    toks = list(prompt)
    for _ in range(10):
        nxt = int(gm.forward_a(cfg, w, toks)[-1].argmax())
        greedy.append(nxt)
        toks.append(nxt)

    lbin = gm.logits_bin(cfg["n_vocab"], seqs, [r.to(torch.float32).numpy() for r in refs])
    with open(os.path.join(os.path.dirname(DIR), NAME + ".logits.bin"), "wb") as fh:
        fh.write(lbin)
    desc = {
        "name": NAME,
        "source": "tests/fixtures/hf/lm_buddy_tiny_gpt2 (README there)",
        "config": {k: cfg[k] for k in ["arch", "n_vocab", "dim", "n_layers", "n_heads",
                                         "ffn_dim", "norm_eps", "tied"]},
        "tokens": seqs,
        "max_abs_logit": round(max(float(r.abs().max()) for r in refs), 6),
        "greedy_prompt": prompt,
        "greedy": greedy,
        "logits_format": gm.LOGITS_FORMAT,
        "generator": "/usr/bin/python3 scripts/gen_hf_real_reference.py",
    }
    with open(os.path.join(os.path.dirname(DIR), NAME + ".json"), "w") as fh:
        json.dump(desc, fh, indent=1)
        fh.write("\n")
    print(f"{NAME}: max|logit| {desc['max_abs_logit']}, greedy after {prompt}: {greedy}")


if __name__ == "__main__":
    main()
