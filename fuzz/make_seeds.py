#!/usr/bin/env python3
"""Writes libFuzzer seed inputs for each fuzz target from the shared reference data.

Usage: make_seeds.py SHARED_DIR OUT_DIR  (OUT_DIR/<fuzzer>/ gets one file per seed)
Seeds are derived at run time and never stored in the repository.
"""
import glob
import json
import os
import shutil
import struct
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
        # The same conversation as a Responses and as an Anthropic Messages body.
        text = lambda m: m.get("content") if isinstance(m.get("content"), str) else ""
        items = [{"role": m["role"] if m["role"] in ("user", "assistant", "system") else "user", "content": text(m)}
                 for m in row["messages"]]
        responses = {"model": "ember", "input": items, "max_output_tokens": 16, "stream": k % 2 == 0}
        if row.get("tools"):
            responses["tools"] = [dict(type="function", **t["function"]) for t in row["tools"] if "function" in t]
        put("fuzz_openai_request", "responses-%s-%d" % (name, k), json.dumps(responses))
        anthropic = {"model": "ember", "max_tokens": 16, "system": "s",
                     "messages": [{"role": "assistant" if m["role"] == "assistant" else "user",
                                   "content": [{"type": "text", "text": text(m)}]} for m in row["messages"]]}
        if row.get("tools"):
            anthropic["tools"] = [{"name": t["function"]["name"], "input_schema": t["function"].get("parameters", {})}
                                  for t in row["tools"] if "function" in t]
            anthropic["tool_choice"] = {"type": "any"}
        if k % 3 == 0:
            anthropic["thinking"] = {"type": "enabled", "budget_tokens": 8}
        put("fuzz_openai_request", "messages-%s-%d" % (name, k), json.dumps(anthropic))
for k, row in enumerate(jsonl(os.path.join(shared, "testdata", "chat_skills", "eval.jsonl"))[:20]):
    put("fuzz_openai_request", "chat-skills-%d" % k,
        json.dumps({"messages": row["messages"], "prompt": row["messages"][-1]["content"], "n": 1}))
# /v1/embeddings bodies from the embedding goldens' cases: texts, token ids, lists, both encodings.
for path in sorted(glob.glob(os.path.join(shared, "testdata", "embeddings", "*.json"))):
    golden = json.load(open(path))
    name = os.path.basename(path)[: -len(".json")]
    cases = golden["cases"]
    put("fuzz_openai_request", "embeddings-%s-texts" % name,
        json.dumps({"model": name, "input": [c["input"] for c in cases], "encoding_format": "float"}))
    put("fuzz_openai_request", "embeddings-%s-ids" % name,
        json.dumps({"input": [c["ids"] for c in cases], "encoding_format": "base64",
                    "dimensions": golden["dimension"], "user": "u"}))
    for k, c in enumerate(cases[:2]):
        put("fuzz_openai_request", "embeddings-%s-%d" % (name, k), json.dumps({"input": c["ids"] if k else c["input"]}))


# GGUF files: the metadata of the small shared files (SentencePiece vocabularies) and a byte-level
# BPE vocabulary written here for each supported pre-tokenizer, each with one tiny tensor of every
# block type the reader dequantizes (the shared files' megabytes of weights would slow mutation).
def gguf_metadata(path):
    """The raw metadata bytes of a GGUF file and their count."""
    b = read(path)
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t, pos):
        if t in sizes:
            return pos + sizes[t]
        if t == 8:
            return pos + 8 + struct.unpack_from("<Q", b, pos)[0]
        et, n = struct.unpack_from("<IQ", b, pos)
        pos += 12
        if et in sizes:
            return pos + n * sizes[et]
        for _ in range(n):
            pos = skip(et, pos)
        return pos

    n_kv = struct.unpack_from("<Q", b, 16)[0]
    pos = 24
    for _ in range(n_kv):
        pos += 8 + struct.unpack_from("<Q", b, pos)[0]
        pos = skip(struct.unpack_from("<I", b, pos)[0], pos + 4)
    return b[24:pos], n_kv


def gguf_str(s):
    s = s.encode("utf-8")
    return struct.pack("<Q", len(s)) + s


def gguf_kv(key, type_id, value):
    return gguf_str(key) + struct.pack("<I", type_id) + value


def gguf_file(kvs, n_kv, tensors):
    infos, data = b"", b""
    for name, dims, type_id, blob in tensors:
        data += b"\0" * (-len(data) % 32)
        infos += gguf_str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", type_id, len(data))
        data += blob
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + kvs + infos
    return head + b"\0" * (-len(head) % 32) + data


def noise(n, seed):
    out, x = bytearray(), seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x >> 16) & 0xFF)
    return bytes(out)


# (name, dims, ggml type id, bytes): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (two rows), Q2_K,
# Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
gguf_tensors = [("f32", [8], 0, struct.pack("<8f", *range(8))), ("f16", [8], 1, noise(16, 1)),
                ("bf16", [8], 30, noise(16, 2)), ("q4_0", [32], 2, noise(18, 3)), ("q4_1", [32], 3, noise(20, 9)),
                ("q5_0", [32], 6, noise(22, 10)), ("q5_1", [32], 7, noise(24, 11)), ("q8_0", [32, 2], 8, noise(68, 4)),
                ("q2_k", [256], 10, noise(84, 12)), ("q3_k", [256], 11, noise(110, 13)),
                ("q4_k", [256], 12, noise(144, 5)), ("q5_k", [256], 13, noise(176, 6)),
                ("q6_k", [256], 14, noise(210, 7)), ("q8_k", [256], 15, noise(292, 8))]
for g in sorted(glob.glob(os.path.join(shared, "models", "gguf", "*.gguf"))):
    if os.path.getsize(g) <= 600 << 10:
        kvs, n_kv = gguf_metadata(g)
        put("fuzz_gguf", os.path.basename(g), gguf_file(kvs, n_kv, gguf_tensors))


def byte_chars():
    """GPT-2's printable stand-ins for the 256 byte values."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra, out = 256, {}
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(extra)
            extra += 1
    return [out[b] for b in range(256)]


bpe_tokens = byte_chars() + ["\u0120t", "he", "\u0120the", "<|eot|>", "<think>"]
bpe_types = [1] * 256 + [1, 1, 1, 3, 4]
bpe_merges = ["\u0120 t", "h e", "\u0120t he"]
for pre in ["default", "llama-bpe", "qwen2", "smollm"]:
    kvs = gguf_kv("tokenizer.ggml.model", 8, gguf_str("gpt2")) + gguf_kv("tokenizer.ggml.pre", 8, gguf_str(pre))
    kvs += gguf_kv("tokenizer.ggml.tokens", 9,
                   struct.pack("<IQ", 8, len(bpe_tokens)) + b"".join(gguf_str(t) for t in bpe_tokens))
    kvs += gguf_kv("tokenizer.ggml.token_type", 9,
                   struct.pack("<IQ", 5, len(bpe_types)) + b"".join(struct.pack("<i", t) for t in bpe_types))
    kvs += gguf_kv("tokenizer.ggml.merges", 9,
                   struct.pack("<IQ", 8, len(bpe_merges)) + b"".join(gguf_str(m) for m in bpe_merges))
    kvs += gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 259))
    kvs += gguf_kv("tokenizer.ggml.add_bos_token", 7, b"\0")
    kvs += gguf_kv("tokenizer.chat_template", 8, gguf_str("{% for m in messages %}{{ m.content }}{% endfor %}"))
    kvs += gguf_kv("general.alignment", 4, struct.pack("<I", 32))
    put("fuzz_gguf", "bpe-" + pre, gguf_file(kvs, 9, gguf_tensors))
