#!/usr/bin/env python3
"""Writes libFuzzer seed inputs for each fuzz target from the shared reference data.

Usage: make_seeds.py SHARED_DIR OUT_DIR  (OUT_DIR/<fuzzer>/ gets one file per seed)
Seeds are derived at run time and never stored in the repository.
"""
import glob
import json
import os
import shutil
import sys

shared, out = sys.argv[1], sys.argv[2]


def put(fuzzer, name, data):
    d = os.path.join(out, fuzzer)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    with open(path, "rb") as f:
        return f.read()


def jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line, object_pairs_hook=dict) for line in f if line.strip()]


shutil.rmtree(out, ignore_errors=True)
models = sorted(glob.glob(os.path.join(shared, "models", "*")))

# Model files: every config.json; safetensors files and shard indexes small enough to mutate quickly.
for m in models:
    name = os.path.basename(m)
    if os.path.exists(os.path.join(m, "config.json")):
        put("fuzz_config", name, read(os.path.join(m, "config.json")))
    for st in glob.glob(os.path.join(m, "*.safetensors")) + glob.glob(os.path.join(m, "*.index.json")):
        if os.path.getsize(st) <= 1200 << 10:
            put("fuzz_safetensors", name + "-" + os.path.basename(st), read(st))

# tokenizer.json [NUL tokenizer_config.json [NUL text]] for the small tokenizers (large ones make
# each run take too long to be worth mutating).
texts = []
for t in sorted(glob.glob(os.path.join(shared, "tokenizers", "*", "tokenizer.json"))):
    folder = os.path.dirname(t)
    name = os.path.basename(folder)
    if os.path.getsize(t) > 256 << 10:
        continue
    cfg = os.path.join(folder, "tokenizer_config.json")
    put("fuzz_tokenizer", name, read(t))
    if os.path.exists(cfg):
        put("fuzz_tokenizer", name + "-config", read(t) + b"\0" + read(cfg) + b"\0<|im_start|>user Hello!")

# Texts of the tokenizer fixtures; the first byte picks one of the fuzzer's tokenizers.
for path in sorted(glob.glob(os.path.join(shared, "testdata", "tokenizer", "*.jsonl"))):
    for row in jsonl(path):
        if row["text"] not in texts:
            texts.append(row["text"])
for i, text in enumerate(texts):
    put("fuzz_tokenizer_text", "text-%04d" % i, bytes([i % 16]) + text.encode("utf-8"))

# Chat templates, alone and with the context of a fixture line; request bodies from the same lines.
for tpl in sorted(glob.glob(os.path.join(shared, "chat_templates", "*.jinja"))):
    name = os.path.basename(tpl)[: -len(".jinja")]
    put("fuzz_jinja", name, read(tpl))
    cases = os.path.join(shared, "testdata", "chat_template", name + ".jsonl")
    if not os.path.exists(cases):
        continue
    for k, row in enumerate(jsonl(cases)[:4]):
        ctx = dict(row.get("variables") or {})
        for key in ("messages", "tools", "documents", "add_generation_prompt"):
            ctx[key] = row.get(key)
        put("fuzz_jinja", "%s-%d" % (name, k), read(tpl) + b"\0" + json.dumps(ctx).encode())
    for k, row in enumerate(jsonl(cases)):
        body = {"model": "ember", "messages": row["messages"], "stream": k % 2 == 0}
        if row.get("tools"):
            body["tools"] = row["tools"]
        if k % 3 == 0:
            body.update({"temperature": 0.7, "top_p": 0.9, "max_tokens": 16, "stop": ["\n"], "seed": k,
                         "logprobs": True, "top_logprobs": 2, "stream_options": {"include_usage": True},
                         "chat_template_kwargs": {"enable_thinking": False}})
        put("fuzz_openai_request", "%s-%d" % (name, k), json.dumps(body))
for k, row in enumerate(jsonl(os.path.join(shared, "testdata", "chat_skills", "eval.jsonl"))[:20]):
    put("fuzz_openai_request", "chat-skills-%d" % k,
        json.dumps({"messages": row["messages"], "prompt": row["messages"][-1]["content"], "n": 1}))
