#!/usr/bin/env python3
"""bench/pad_model.py keeps a model's behaviour: chat-skills padded with 3 layers loads with 8 layers,
and its last-position logits equal chat-skills' bit for bit on several prompts (each padding layer
adds an exact 0.0 to the residual stream).
Usage: pad_model_test.py EMBER_BINARY SOURCE_DIR SHARED_DIR"""
import json
import os
import subprocess
import sys
import tempfile

ember, source, shared = sys.argv[1:4]
model = os.path.join(shared, "models", "chat-skills")


def logits(folder, lines):
    out = subprocess.run([ember, "logits", "-m", folder, "--jsonl", "-t", "1"], input=lines, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return [json.loads(l)["logits"] for l in out.splitlines() if l.strip()]


with tempfile.TemporaryDirectory() as tmp:
    padded = os.path.join(tmp, "padded")
    subprocess.run([sys.executable, os.path.join(source, "bench", "pad_model.py"), model, padded, "--layers", "3"],
                   check=True, timeout=120)
    with open(os.path.join(padded, "config.json")) as f:
        assert json.load(f)["num_hidden_layers"] == 8, "5 layers + 3 padding layers"
    lines = "".join(json.dumps({"ids": ids}) + "\n" for ids in ([1, 5, 6, 7], [1] + list(range(100, 140)), [1, 2049, 2050, 9]))
    want, got = logits(model, lines), logits(padded, lines)
    assert len(want) == len(got) == 3, (len(want), len(got))
    for i, (w, g) in enumerate(zip(want, got)):
        assert w == g, f"prompt {i}: padded logits differ from chat-skills' (first at {next(j for j in range(len(w)) if w[j] != g[j])})"
    # The comparison can fail: with the first padding layer's o_proj taken from layer 4 (not zero) the
    # logits differ.
    sys.path.insert(0, os.path.join(source, "bench"))
    import pad_model
    path = os.path.join(padded, "model.safetensors")
    meta, tensors = pad_model.read_safetensors(path)
    tensors["model.layers.5.self_attn.o_proj.weight"] = tensors["model.layers.4.self_attn.o_proj.weight"]
    pad_model.write_safetensors(path, meta, tensors)
    assert logits(padded, lines) != want, "a padding layer that adds to the residual must change the logits"
    print("ok: chat-skills padded with 3 layers gives the same logits bit for bit")
