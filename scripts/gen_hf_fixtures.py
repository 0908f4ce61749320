#!/usr/bin/python3
"""Hugging Face checkpoint folders of the golden models, for `nexus convert --hf`.

Run with Debian's python (torch + numpy, nothing else, no network):

    /usr/bin/python3 scripts/gen_hf_fixtures.py        # writes tests/fixtures/hf/NAME/

For llama_gqa_tied, llama_untied, qwen2, qwen3 and gpt2 it regenerates the weights of
tests/fixtures/models/NAME.gguf (gen_model_fixtures.make_weights with the same seed; the script
stops unless its GGUF of them is byte for byte the committed one) and writes them the way
transformers' save_pretrained lays them out:

  config.json             LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM / GPT2LMHeadModel
  model.safetensors       F32, or for llama_untied two shards model-0000{1,2}-of-00002.safetensors
                          and model.safetensors.index.json (its weight_map); qwen3_bf16 is
                          qwen3 with every tensor rounded to BF16 by torch
  tokenizer.json          byte-level BPE (qwen2, qwen3, gpt2: the Qwen2 and GPT-2 pre-tokenizers)
                          or SentencePiece-style BPE with byte_fallback (llama), over the same
                          tokens as the GGUF fixture's vocabulary
  tokenizer_config.json   bos/eos/unk/pad tokens, add_bos_token, a chat template

The layouts are transformers': Llama's q_proj/k_proj rows in rotate-half order (the inverse of
the converter's permutation, so converting gives back the GGUF's interleaved rows), GPT-2's
Conv1D matrices stored [in, out], GPT-2's attn.bias causal-mask buffers and its scalar
masked_bias, tied models without lm_head.weight. The reference logits are the committed
tests/fixtures/models/NAME.logits.bin: a correct conversion must reproduce them.

The safetensors writer below follows the format's definition: an unsigned 64-bit little-endian
header length, a JSON object {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__":
{...}} padded with spaces to a multiple of 8 bytes, then the tensors' little-endian bytes back to
back in header order.
"""

import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_fixtures as gm  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20240611
NAMES = ["llama_gqa_tied", "llama_untied", "qwen2", "qwen3", "gpt2"]
SHARDED = {"llama_untied"}
# Also written with every tensor in BF16 (torch's rounding), as NAME_bf16.
BF16 = {"qwen3"}

# Qwen2's pre-tokenizer regex, as its tokenizer.json holds it.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% endif %}")


def safetensors_bytes(tensors, dtype="F32"):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        if dtype == "BF16":  # torch's own float32 -> bfloat16 rounding, its bits as int16
            data = t.to(torch.float32).to(torch.bfloat16).contiguous().view(torch.int16)
            data = data.numpy().astype("<i2").tobytes()
        else:
            data = np.ascontiguousarray(t.numpy().astype("<f4")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def unpermute(w, n_head):
    """HF's rotate-half row order from GGUF's interleaved pairs (what the converter undoes)."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_tensors(cfg, w):
    out = {}
    if cfg["arch"] == "gpt2":
        n = cfg["n_ctx"]
        out["transformer.wte.weight"] = w["tok_embd"]
        out["transformer.wpe.weight"] = w["pos_embd"]
        for i, L in enumerate(w["layers"]):
            p = f"transformer.h.{i}."
            out[p + "ln_1.weight"], out[p + "ln_1.bias"] = L["attn_norm"], L["attn_norm_b"]
            # transformers' non-persistent buffers, present in older checkpoints
            out[p + "attn.bias"] = torch.tril(torch.ones(n, n)).reshape(1, 1, n, n)
            out[p + "attn.masked_bias"] = torch.tensor(-1e4)
            out[p + "attn.c_attn.weight"], out[p + "attn.c_attn.bias"] = L["wqkv"].T, L["bqkv"]
            out[p + "attn.c_proj.weight"], out[p + "attn.c_proj.bias"] = L["wo"].T, L["bo"]
            out[p + "ln_2.weight"], out[p + "ln_2.bias"] = L["ffn_norm"], L["ffn_norm_b"]
            out[p + "mlp.c_fc.weight"], out[p + "mlp.c_fc.bias"] = L["w_up"].T, L["b_up"]
            out[p + "mlp.c_proj.weight"], out[p + "mlp.c_proj.bias"] = L["w_down"].T, L["b_down"]
        out["transformer.ln_f.weight"], out["transformer.ln_f.bias"] = w["out_norm"], w["out_norm_b"]
        return out
    llama = cfg["arch"] == "llama"
    out["model.embed_tokens.weight"] = w["tok_embd"]
    for i, L in enumerate(w["layers"]):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = L["attn_norm"]
        a = p + "self_attn."
        out[a + "q_proj.weight"] = unpermute(L["wq"], cfg["n_heads"]) if llama else L["wq"]
        out[a + "k_proj.weight"] = unpermute(L["wk"], cfg["n_kv_heads"]) if llama else L["wk"]
        out[a + "v_proj.weight"] = L["wv"]
        if cfg["qkv_bias"]:
            out[a + "q_proj.bias"], out[a + "k_proj.bias"] = L["bq"], L["bk"]
            out[a + "v_proj.bias"] = L["bv"]
        out[a + "o_proj.weight"] = L["wo"]
        if cfg["qk_norm"]:
            out[a + "q_norm.weight"], out[a + "k_norm.weight"] = L["q_norm"], L["k_norm"]
        out[p + "post_attention_layernorm.weight"] = L["ffn_norm"]
        out[p + "mlp.gate_proj.weight"] = L["w_gate"]
        out[p + "mlp.up_proj.weight"] = L["w_up"]
        out[p + "mlp.down_proj.weight"] = L["w_down"]
    out["model.norm.weight"] = w["out_norm"]
    if not cfg["tied"]:
        out["lm_head.weight"] = w["output"]
    return out


def hf_config(cfg):
    V = cfg["n_vocab"]
    if cfg["arch"] == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
                "n_embd": cfg["dim"], "n_layer": cfg["n_layers"], "n_head": cfg["n_heads"],
                "n_inner": cfg["ffn_dim"], "n_positions": cfg["n_ctx"], "n_ctx": cfg["n_ctx"],
                "layer_norm_epsilon": cfg["norm_eps"], "activation_function": "gelu_new",
                "bos_token_id": V - 1, "eos_token_id": V - 1, "tie_word_embeddings": True,
                "torch_dtype": "float32"}
    arch, mtype = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2"),
                   "qwen3": ("Qwen3ForCausalLM", "qwen3")}[cfg["arch"]]
    c = {"architectures": [arch], "model_type": mtype, "vocab_size": V,
         "hidden_size": cfg["dim"], "num_hidden_layers": cfg["n_layers"],
         "num_attention_heads": cfg["n_heads"], "num_key_value_heads": cfg["n_kv_heads"],
         "intermediate_size": cfg["ffn_dim"], "max_position_embeddings": cfg["n_ctx"],
         "rms_norm_eps": cfg["norm_eps"], "rope_theta": cfg["rope_base"], "rope_scaling": None,
         "hidden_act": "silu", "tie_word_embeddings": cfg["tied"], "torch_dtype": "float32"}
    if cfg["arch"] == "qwen3":
        c["head_dim"] = cfg["head_dim"]
    if cfg["arch"] == "llama":
        c.update(bos_token_id=1, eos_token_id=2)
    else:
        c.update(bos_token_id=V - 1, eos_token_id=V - 1, use_sliding_window=False)
    return c


def byte_level_tokenizer(cfg):
    """The GGUF fixture's byte-level vocabulary (printable ASCII, which byte-level BPE maps to
    itself, and merges of letter pairs) with <|endoftext|> as the last id."""
    V = cfg["n_vocab"]
    pieces = gm.byte_level_pieces(V)
    eot = "<|endoftext|>"
    if cfg["arch"] == "gpt2":
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
        normalizer = None
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]}
        normalizer = {"type": "NFC"}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": V - 1, "content": eot, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}],
           "normalizer": normalizer, "pre_tokenizer": pre,
           "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": False, "use_regex": False},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": "", "end_of_word_suffix": "",
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": {p: i for i, p in enumerate(pieces)},
                     "merges": [[m[0], m[1]] for m in pieces if len(m) == 2]}}
    if cfg["arch"] == "gpt2":
        tc = {"bos_token": eot, "eos_token": eot, "unk_token": eot, "add_prefix_space": False,
              "model_max_length": cfg["n_ctx"], "tokenizer_class": "GPT2Tokenizer"}
    else:
        tc = {"bos_token": None, "eos_token": eot, "pad_token": eot, "add_bos_token": False,
              "chat_template": CHAT_TEMPLATE, "model_max_length": cfg["n_ctx"],
              "tokenizer_class": "Qwen2Tokenizer"}
    return tok, tc


def spm_tokenizer(cfg):
    """A SentencePiece-style BPE tokenizer.json (Llama 2's layout: Prepend/Replace normalizer,
    byte_fallback) over the GGUF fixture's llama pieces; merges build the repeated letters."""
    V = cfg["n_vocab"]
    pieces = ["<unk>", "<s>", "</s>"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    for i in range(V - 3):
        a, b = divmod(i, 26)
        pieces.append(("\u2581" if a % 2 == 0 else "") + letters[b] * (a // 2 + 1))
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for p in pieces[3:]:
        body = p.lstrip("\u2581")
        if len(body) >= 2 and p[:-1] in vocab:
            merges.append([p[:-1], p[-1]])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(pieces[:3])]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Prepend", "prepend": "\u2581"},
               {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
           "pre_tokenizer": None,
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}},
                                       {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                       {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [1],
                                                         "tokens": ["<s>"]}}},
           "decoder": {"type": "Sequence", "decoders": [
               {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
               {"type": "ByteFallback"}, {"type": "Fuse"},
               {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                     "vocab": vocab, "merges": merges}}
    tc = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
          "add_bos_token": True, "add_eos_token": False, "legacy": True,
          "model_max_length": cfg["n_ctx"], "tokenizer_class": "LlamaTokenizer"}
    return tok, tc


def write(path, data):
    with open(path, "wb") as fh:
        fh.write(data)


def write_json(path, obj):
    write(path, (json.dumps(obj, indent=1, ensure_ascii=False) + "\n").encode())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "hf"))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    models = os.path.join(REPO, "tests", "fixtures", "models")
    for index, case in enumerate(gm.CASES):
        if case["name"] not in NAMES:
            continue
        cfg = gm.full_config(case)
        w = gm.make_weights(cfg, SEED + 1000 * index)
        with open(os.path.join(models, cfg["name"] + ".json")) as fh:
            want = json.load(fh)["gguf_sha256"]
        if hashlib.sha256(gm.build_gguf(cfg, w)).hexdigest() != want:
            sys.exit(f"{cfg['name']}: regenerated weights differ from {cfg['name']}.gguf")
        d = os.path.join(args.out, cfg["name"])
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        tensors = hf_tensors(cfg, w)
        if cfg["name"] in SHARDED:
            names = list(tensors)
            half = len(names) // 2
            shards = [names[:half], names[half:]]
            weight_map, total = {}, 0
            for k, part in enumerate(shards):
                fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
                write(os.path.join(d, fname), safetensors_bytes({n: tensors[n] for n in part}))
                for n in part:
                    weight_map[n] = fname
                    total += tensors[n].numel() * 4
            write_json(os.path.join(d, "model.safetensors.index.json"),
                       {"metadata": {"total_size": total}, "weight_map": weight_map})
        else:
            write(os.path.join(d, "model.safetensors"), safetensors_bytes(tensors))
        write_json(os.path.join(d, "config.json"), hf_config(cfg))
        tok, tc = spm_tokenizer(cfg) if cfg["arch"] == "llama" else byte_level_tokenizer(cfg)
        write_json(os.path.join(d, "tokenizer.json"), tok)
        write_json(os.path.join(d, "tokenizer_config.json"), tc)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{cfg['name']:15s} {len(tensors):3d} tensors  {size:7d} B  -> {d}")
        if cfg["name"] in BF16:
            b = d + "_bf16"
            os.makedirs(b, exist_ok=True)
            for f in os.listdir(d):
                if f != "model.safetensors":
                    write(os.path.join(b, f), open(os.path.join(d, f), "rb").read())
            write(os.path.join(b, "model.safetensors"), safetensors_bytes(tensors, "BF16"))
            print(f"{cfg['name'] + '_bf16':15s} {len(tensors):3d} tensors (BF16)  -> {b}")


if __name__ == "__main__":
    main()
