#!/usr/bin/python3
"""Fixtures that check nexus reads the GGUFs llama.cpp's converter writes for Mamba-1, Mamba-2
and Granite 4.0-H hybrids: tiny random-weight models as Hugging Face checkpoints (config.json, model.safetensors,
tokenizer.model, the layouts of state-spaces' and IBM's models on the Hub), their float64 reference
logits, and (a second, manual step) the converter's GGUF of each.

Step 1, this script (Debian's python: torch, numpy, sentencepiece; no network):

    /usr/bin/python3 scripts/gen_hf_ssm_fixtures.py [--hf-out /tmp/nexus-hf]

writes HF_OUT/NAME/ and tests/fixtures/models/NAME.{logits.bin,json} for NAME in hf_mamba,
hf_mamba2 and hf_granitehybrid. The reference is gen_ssm_fixtures.py's formulation A on the
weights exactly as the converter stores them: it keeps F32 tensors as they are, squeezes
conv1d.weight [C, 1, K] to [C, K], renames dt_bias to ssm_dt.bias, stores A_log as
A = -exp(A_log) (float32, so the reference uses that float32 A), Mamba-2's A and D as [H, 1] and
its norm as [G, D/G], permutes the rows of q_proj and k_proj from HF's rotate-half order to
GGUF's interleaved pairs (the checkpoint holds the inverse), and splits Granite's
shared_mlp.input_linear into ffn_gate and ffn_up.

Step 2, with a llama.cpp checkout outside this repository (its convert_hf_to_gguf.py):

    python3 LLAMA_CPP/convert_hf_to_gguf.py HF_OUT/NAME --outtype f32 \\
        --outfile tests/fixtures/models/NAME.gguf

(the converter needs torch >= 2.1, for the float8 dtypes it names, and imports transformers'
AutoConfig at the top, which the Mamba classes do not use). The golden tests then load NAME.gguf
like every other fixture and compare its logits with NAME.logits.bin; the JSON's config holds
what the converter writes (context_length 2^20, as it does for every Mamba model).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_hf_fixtures as hf  # noqa: E402
import gen_model_fixtures as gm  # noqa: E402
import gen_ssm_fixtures as ss  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERTER_CTX = 2 ** 20  # the context length convert_hf_to_gguf.py writes for Mamba models

CASES = [
    dict(ss.MAMBA, name="hf_mamba", n_vocab=96, tied=False, seed=31,
         checks="MambaForCausalLM through llama.cpp's converter: d_inner 64 (2 x dim), d_state 8, "
                "d_conv 4, time_step_rank 4, untied lm_head; A_log stored as -exp(A_log), "
                "conv1d squeezed"),
    dict(ss.MAMBA2, name="hf_mamba2", n_vocab=96, tied=True, seed=32,
         checks="Mamba2ForCausalLM through llama.cpp's converter: 4 heads x 16, d_state 16, "
                "2 groups, tied embeddings (no lm_head); dt_bias renamed, A and D as [H, 1], "
                "the gated norm as [G, D/G]"),
    # Granite's converter takes no head_dim (dim / heads it is), so dim 64 keeps a K/V row of
    # 2 x 16 (a multiple of 32, for the Q8_0 KV cache).
    dict(ss.GRANITE, name="hf_granitehybrid", n_vocab=96, dim=64, d_inner=128, head_dim=None,
         tied=True, seed=33,
         checks="GraniteMoeHybridForCausalLM (Granite 4.0-H layout) through llama.cpp's "
                "converter: layer_types mamba, attention, mamba, mamba; NoPE; attention 4 / 2 "
                "heads of 16 (q/k rows permuted by the converter), shared_mlp.input_linear split "
                "into gate and up, Mamba-2 mixer 4 heads x 32, 2 groups, d_state 16; tied"),
]


def unpermute(wt, n_head):
    """The inverse of the converter's q/k permutation (HF's rotate-half row order per head to
    GGUF's interleaved pairs), so that the converted rows are the reference's."""
    return (wt.reshape(n_head, wt.shape[0] // n_head // 2, 2, *wt.shape[1:])
            .swapaxes(1, 2).reshape(wt.shape))


def hf_tensors(cfg, w):
    """The HF checkpoint's tensors (float32) for the weights w, and w updated to what the
    converter will store (A from the float32 A_log)."""
    if cfg["arch"] == "granitehybrid":
        return granite_tensors(cfg, w)
    out = {"backbone.embeddings.weight": w["tok_embd"]}
    for i, L in enumerate(w["layers"]):
        p = f"backbone.layers.{i}."
        out[p + "norm.weight"] = L["attn_norm"]
        out.update(mixer_tensors(cfg, L, p + "mixer."))
    out["backbone.norm_f.weight"] = w["out_norm"]
    if not cfg["tied"]:
        out["lm_head.weight"] = w["output"]
    return {k: v.to(torch.float32).contiguous() for k, v in out.items()}


def granite_tensors(cfg, w):
    """GraniteMoeHybrid's names: model.layers.N.{input_layernorm, mamba.* or self_attn.*,
    post_attention_layernorm, shared_mlp.input_linear (gate and up stacked), output_linear}."""
    out = {"model.embed_tokens.weight": w["tok_embd"]}
    for i, (kind, L) in enumerate(zip(cfg["layer_kinds"], w["layers"])):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = L["attn_norm"]
        if kind == "ssm":
            out.update(mixer_tensors(cfg, L, p + "mamba."))
        else:
            out[p + "self_attn.q_proj.weight"] = unpermute(L["wq"], cfg["n_heads"])
            out[p + "self_attn.k_proj.weight"] = unpermute(L["wk"], cfg["n_kv_heads"])
            out[p + "self_attn.v_proj.weight"] = L["wv"]
            out[p + "self_attn.o_proj.weight"] = L["wo"]
        out[p + "post_attention_layernorm.weight"] = L["ffn_norm"]
        out[p + "shared_mlp.input_linear.weight"] = torch.cat([L["w_gate"], L["w_up"]], 0)
        out[p + "shared_mlp.output_linear.weight"] = L["w_down"]
    out["model.norm.weight"] = w["out_norm"]
    if not cfg["tied"]:
        out["lm_head.weight"] = w["output"]
    return {k: v.to(torch.float32).contiguous() for k, v in out.items()}


def mixer_tensors(cfg, L, m):
    """A Mamba mixer's tensors under the prefix m."""
    out = {}
    out[m + "in_proj.weight"] = L["ssm_in"]
    out[m + "conv1d.weight"] = L["conv_w"].unsqueeze(1)
    out[m + "conv1d.bias"] = L["conv_b"]
    a_log = torch.log(-L["ssm_a"]).to(torch.float32)
    L["ssm_a"] = (-torch.exp(a_log)).to(torch.float64)  # what the GGUF holds
    if cfg["arch"] == "mamba":
        out[m + "x_proj.weight"] = L["ssm_x"]
        out[m + "dt_proj.weight"] = L["ssm_dt"]
        out[m + "dt_proj.bias"] = L["dt_bias"]
        out[m + "A_log"] = a_log
        out[m + "D"] = L["ssm_d"]
    else:
        out[m + "dt_bias"] = L["dt_bias"]
        out[m + "A_log"] = a_log.reshape(-1)
        out[m + "D"] = L["ssm_d"].reshape(-1)
        out[m + "norm.weight"] = L["ssm_norm"].reshape(-1)
    out[m + "out_proj.weight"] = L["ssm_out"]
    return out


def hf_config(cfg):
    if cfg["arch"] == "granitehybrid":
        return {
            "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
            "vocab_size": cfg["n_vocab"], "hidden_size": cfg["dim"],
            "num_hidden_layers": cfg["n_layers"], "num_attention_heads": cfg["n_heads"],
            "num_key_value_heads": cfg["n_kv_heads"], "intermediate_size": cfg["ffn_dim"],
            "shared_intermediate_size": cfg["ffn_dim"], "num_local_experts": 0,
            "layer_types": ["mamba" if k == "ssm" else "attention" for k in cfg["layer_kinds"]],
            "mamba_expand": cfg["d_inner"] // cfg["dim"], "mamba_n_heads": cfg["n_head"],
            "mamba_d_head": cfg["ssm_head_dim"], "mamba_n_groups": cfg["n_group"],
            "mamba_d_state": cfg["d_state"], "mamba_d_conv": cfg["d_conv"],
            "mamba_conv_bias": True, "mamba_proj_bias": False, "hidden_act": "silu",
            "rms_norm_eps": cfg["norm_eps"], "max_position_embeddings": cfg["n_ctx"],
            "rope_theta": cfg["rope_base"], "position_embedding_type": "nope",
            "tie_word_embeddings": cfg["tied"], "torch_dtype": "float32"}
    c = {"vocab_size": cfg["n_vocab"], "hidden_size": cfg["dim"],
         "num_hidden_layers": cfg["n_layers"], "state_size": cfg["d_state"],
         "conv_kernel": cfg["d_conv"], "expand": cfg["d_inner"] // cfg["dim"],
         "layer_norm_epsilon": cfg["norm_eps"], "tie_word_embeddings": cfg["tied"],
         "use_conv_bias": True, "use_bias": False, "torch_dtype": "float32"}
    if cfg["arch"] == "mamba":
        c.update(architectures=["MambaForCausalLM"], model_type="mamba",
                 intermediate_size=cfg["d_inner"], time_step_rank=cfg["dt_rank"])
    else:
        c.update(architectures=["Mamba2ForCausalLM"], model_type="mamba2",
                 num_heads=cfg["n_head"], head_dim=cfg["ssm_head_dim"], n_groups=cfg["n_group"],
                 rms_norm=True, norm_before_gate=False, pad_vocab_size_multiple=16)
    return c


def train_tokenizer(path_prefix, n_vocab):
    """A small SentencePiece BPE model (fewer pieces than the embedding's rows, which the
    converter pads) trained on a fixed text, so that the converter's SentencePiece path runs."""
    import sentencepiece as spm
    text = ("the quick brown fox jumps over the lazy dog. a state space model reads one token "
            "at a time and keeps a fixed state.\n") * 40
    src = path_prefix + ".txt"
    with open(src, "w") as fh:
        fh.write(text)
    spm.SentencePieceTrainer.train(input=src, model_prefix=path_prefix, model_type="bpe",
                                   vocab_size=min(n_vocab, 64), character_coverage=1.0,
                                   minloglevel=2)
    os.remove(src)


def run_case(case, hf_out, models_out):
    cfg = ss.full_config(case)
    rng = np.random.default_rng(cfg["seed"])
    w = ss.make_weights(cfg, rng)
    tensors = hf_tensors(cfg, w)
    seqs = [rng.integers(0, cfg["n_vocab"], n).tolist() for n in cfg["seq_lens"]]
    seqs[1][-1] = cfg["n_vocab"] - 1
    refs = [ss.forward_a(cfg, w, [s])[0][0] for s in seqs]

    d = os.path.join(hf_out, cfg["name"])
    os.makedirs(d, exist_ok=True)
    ss.write(os.path.join(d, "model.safetensors"), hf.safetensors_bytes(tensors))
    ss.write(os.path.join(d, "config.json"), (json.dumps(hf_config(cfg), indent=1) + "\n").encode())
    train_tokenizer(os.path.join(d, "tokenizer"), cfg["n_vocab"])
    os.remove(os.path.join(d, "tokenizer.vocab"))

    lbin = gm.logits_bin(cfg["n_vocab"], seqs, [r.to(torch.float32).numpy() for r in refs])
    if cfg["arch"] == "granitehybrid":
        keys = ["arch", "n_vocab", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                "ffn_dim", "layer_kinds", "rope", "rope_base", "d_inner", "d_state", "d_conv",
                "n_head", "ssm_head_dim", "n_group", "norm_eps", "tied"]
    else:
        keys = ["arch", "n_vocab", "dim", "n_layers", "d_inner", "d_state", "d_conv"]
        keys += ["dt_rank"] if cfg["arch"] == "mamba" else ["n_head", "head_dim", "n_group"]
        keys += ["norm_eps", "tied"]
    desc = {
        "name": cfg["name"],
        "checks": cfg["checks"],
        "config": dict({k: cfg[k] for k in keys}, n_ctx=CONVERTER_CTX),
        "gguf": cfg["name"] + ".gguf",
        "gguf_written_by": "llama.cpp convert_hf_to_gguf.py --outtype f32 (step 2 above)",
        "hf_checkpoint": sorted(tensors),
        "logits": cfg["name"] + ".logits.bin",
        "logits_format": gm.LOGITS_FORMAT,
        "n_params": gm.n_params(w),
        "tokens": seqs,
        "max_abs_logit": round(max(float(r.abs().max()) for r in refs), 4),
        "generator": "/usr/bin/python3 scripts/gen_hf_ssm_fixtures.py",
    }
    ss.write(os.path.join(models_out, cfg["name"] + ".logits.bin"), lbin)
    ss.write(os.path.join(models_out, cfg["name"] + ".json"),
             (json.dumps(desc, indent=1) + "\n").encode())
    print(f"{cfg['name']:10s} HF checkpoint {d}  logits {len(lbin)} B  "
          f"max|logit| {desc['max_abs_logit']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hf-out", default="/tmp/nexus-hf")
    ap.add_argument("--models-out", default=os.path.join(REPO, "tests", "fixtures", "models"))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    for case in CASES:
        run_case(case, args.hf_out, args.models_out)


if __name__ == "__main__":
    main()
