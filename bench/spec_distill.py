#!/usr/bin/env python3
"""Writes a sequence-level distillation corpus: greedy continuations of corpus snippets by a
target model served with `nexus serve`. A draft fine-tuned on this text proposes what the target
would say, which is what speculative decoding rewards."""
import argparse
import concurrent.futures as cf
import json
import random
import urllib.request


def complete(url, prompt, max_tokens):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)["choices"][0]["text"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=112)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    lines = [l for l in open(a.corpus, encoding="utf-8").read().split("\n") if len(l) > 12]
    rng = random.Random(a.seed)
    # Prompts: a speaker's name line or the first words of a line, as a user would start.
    prompts = []
    for _ in range(a.prompts):
        line = rng.choice(lines)
        words = line.split()
        prompts.append(" ".join(words[: rng.randint(1, min(4, len(words)))]))
    with cf.ThreadPoolExecutor(a.clients) as ex:
        texts = list(ex.map(lambda p: p + complete(a.url, p, a.max_tokens), prompts))
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n\n".join(texts) + "\n")
    import os
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: {len(texts)} continuations, {sum(map(len, texts))} characters")


if __name__ == "__main__":
    main()
