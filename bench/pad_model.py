#!/usr/bin/env python3
"""A copy of a small Llama-family folder (e.g. chat-skills) with N padding layers after its own: each
copies the last layer's weights but with o_proj and down_proj all zero, so it adds an exact 0.0 to
the residual stream and the model's logits and replies stay the original's bit for bit, while every
decode step streams the padding's weights. A trained model's behaviour at a memory-bound size: what
speculative decoding is for (bench/spec_bench --chat-model DIR).

  bench/pad_model.py ../shared/models/chat-skills /tmp/chat-skills-padded --layers 200

Only Llama-layout BF16/F16/F32 safetensors (one file) are handled; other files are copied."""
import argparse
import json
import os
import shutil
import struct


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}
    return meta, tensors


def write_safetensors(path, meta, tensors):
    header, offset, blobs = {}, 0, []
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--layers", type=int, required=True, help="padding layers to add")
    a = ap.parse_args()
    with open(os.path.join(a.src, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") != "llama":
        raise SystemExit(f"{a.src}/config.json: model_type {config.get('model_type')!r}, only 'llama' is handled")
    weights = os.path.join(a.src, "model.safetensors")
    if not os.path.exists(weights):
        raise SystemExit(f"{weights}: missing (only single-file folders are handled)")
    meta, tensors = read_safetensors(weights)
    n = config["num_hidden_layers"]
    last = f"model.layers.{n - 1}."
    zeroed = ("self_attn.o_proj.weight", "mlp.down_proj.weight")
    out = dict(tensors)
    for i in range(n, n + a.layers):
        for name, (dtype, shape, blob) in tensors.items():
            if name.startswith(last):
                part = name[len(last):]
                out[f"model.layers.{i}.{part}"] = (dtype, shape, bytes(len(blob)) if part in zeroed else blob)
    os.makedirs(a.dst, exist_ok=True)
    for entry in os.listdir(a.src):
        if entry not in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(a.src, entry), os.path.join(a.dst, entry))
    config["num_hidden_layers"] = n + a.layers
    with open(os.path.join(a.dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(a.dst, "model.safetensors"), meta, out)
    size = os.path.getsize(os.path.join(a.dst, "model.safetensors"))
    print(f"{a.dst}: {n} + {a.layers} layers, {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
