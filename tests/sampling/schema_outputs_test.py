#!/usr/bin/env python3
"""Every output of `ember generate --json-schema` from random-weight models, sampled at temperature 1
with 5 seeds, must be JSON that validates against its schema, checked by an independent validator
(python3-jsonschema, formats included). The schemas: tests/sampling/schemas/*.json and the draft 7
schemas of the JSON-Schema-Test-Suite that Ember's converter supports (the others are refused with
an "unsupported keyword" error; a substantial number must be supported).

A schema of bounded size must finish (stop) within the token limit; an unbounded one (strings or
arrays without a maximum) may run into it: those outputs are checked only when they stopped, and
most outputs must stop. The corpus runs on two models, the suite's schemas on one.

Usage: schema_outputs_test.py EMBER_BINARY SOURCE_DIR SHARED_DIR [SUITE_DIR]"""
import concurrent.futures
import json
import pathlib
import random
import subprocess
import sys
import tempfile

import jsonschema

ember, src, shared = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
suite = pathlib.Path(sys.argv[4] if len(sys.argv) > 4 else "/usr/share/json-schema-test-suite") / "tests" / "draft7"
# The tiny-* models' own 2048-token vocabulary has no "{" (nor byte tokens): JSON is impossible with
# it. So each tiny model's architecture and shapes get a real tokenizer (Qwen3's, Llama-3.2's) and
# random weights of the matching vocabulary size, written to a temporary folder.
# (Qwen3's 151,669 byte-level tokens; TinyLlama's 32,000 SentencePiece tokens with byte fallback.)
pairs = [("tiny-qwen3-bf16", "qwen3", 151643), ("tiny-llama3-bf16", "tinyllama-1.1b-chat", 2)]
seeds = range(1, 6)
max_tokens, unbounded_tokens = 400, 120


def bounded(s):
    """True if every output the schema allows is short (no unbounded string, array or object)."""
    if isinstance(s, bool):
        return not s
    if "const" in s or "enum" in s:
        return True
    if "$ref" in s or not s:
        return False  # recursion or any value
    for key in ("anyOf", "oneOf"):
        if key in s:
            return all(bounded(b) for b in s[key])
    types = s.get("type", [])
    types = [types] if isinstance(types, str) else types
    if not types:
        return False
    for t in types:
        if t == "string" and "maxLength" not in s and "format" not in s:
            return False
        if t == "array" and ("maxItems" not in s or not bounded(s.get("items", {}))):
            return False
        if t == "object" and (s.get("additionalProperties", False) is not False or
                              not all(bounded(p) for p in s.get("properties", {}).values())):
            return False
    return True


def random_bf16(count, rng_bytes):
    """`count` bf16 values of random sign with magnitudes in [2^-7, 2^-5): small, finite weights."""
    data = bytearray(rng_bytes(2 * count))
    high = bytes(((b & 0x80) | 0x3C | (b & 1)) for b in range(256))  # sign, exponent 120..123
    data[1::2] = bytes(data[1::2]).translate(high)
    return data


def make_model(tiny, tokenizer, eos, out):
    """tiny's config and tensor names with the tokenizer's vocabulary and random weights (fixed seed)."""
    rng = random.Random(tiny)
    out.mkdir()
    tok_dir = shared / "tokenizers" / tokenizer
    tok_json = json.loads((tok_dir / "tokenizer.json").read_text())
    vocab = max([*tok_json["model"]["vocab"].values(), *(t["id"] for t in tok_json["added_tokens"])]) + 1
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (tok_dir / name).exists():
            (out / name).write_bytes((tok_dir / name).read_bytes())
    config = json.loads((shared / "models" / tiny / "config.json").read_text())
    old_vocab = config["vocab_size"]
    config.update(vocab_size=vocab, eos_token_id=eos, bos_token_id=None)
    (out / "config.json").write_text(json.dumps(config))
    with open(shared / "models" / tiny / "model.safetensors", "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    header.pop("__metadata__", None)
    new_header, blobs, offset = {}, [], 0
    for name, t in sorted(header.items()):
        shape = [vocab if d == old_vocab else d for d in t["shape"]]
        count = 1
        for d in shape:
            count *= d
        blobs.append(random_bf16(count, rng.randbytes))
        new_header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * count]}
        offset += 2 * count
    text = json.dumps(new_header).encode()
    with open(out / "model.safetensors", "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)
    return out


def run(schema_path, model, limit):
    """The five samples' (text, finish reason), or the failed process."""
    p = subprocess.run([ember, "generate", "-m", str(model), "-p", "JSON:", "--no-special", "--json-schema",
                        str(schema_path), "--temperature", "1", "--seed", "1", "--num-return-sequences",
                        str(len(seeds)), "-n", str(limit)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return p
    chunks = [c.split("\n", 1)[1] for c in p.stdout.split("--- sample ")[1:]]  # after each header line
    texts = [c[len("JSON:"):].removesuffix("\n") for c in chunks]
    finishes = [line.rsplit("stop: ", 1)[1].strip() for line in p.stderr.splitlines() if "stop: " in line]
    assert len(texts) == len(finishes) == len(seeds), p.stdout + p.stderr
    return list(zip(texts, finishes))


with tempfile.TemporaryDirectory() as tmp:
    models = [make_model(t, k, e, pathlib.Path(tmp) / t) for t, k, e in pairs]
    cases = []  # (name, schema, path)
    for f in sorted((src / "tests" / "sampling" / "schemas").glob("*.json")):
        cases.append((f.name, json.loads(f.read_text()), f))
    corpus = len(cases)
    suite_files = sorted(suite.rglob("*.json"))
    assert suite_files, f"{suite}: install json-schema-test-suite (scripts/install-deps.sh)"
    skipped = 0
    for f in suite_files:
        for i, group in enumerate(json.loads(f.read_text())):
            path = pathlib.Path(tmp) / f"{f.stem}-{i}.json"
            path.write_text(json.dumps(group["schema"]))
            cases.append((f"{f.relative_to(suite)}#{i}", group["schema"], path))

    # The corpus on both models, the suite's schemas (many small ones) on the smaller vocabulary; an
    # unbounded schema gets fewer tokens (its cut outputs are not checked anyway).
    jobs = [(c, m) for c in cases[:corpus] for m in models] + [(c, models[1]) for c in cases[corpus:]]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(
            lambda j: (j, run(j[0][2], j[1], max_tokens if bounded(j[0][1]) else unbounded_tokens)), jobs))

    failures, used, stopped, cut = [], set(), 0, 0
    unsupported_cases = set()
    for (case, model), outputs in results:
        name, schema, _ = case
        if isinstance(outputs, subprocess.CompletedProcess):
            err = outputs.stderr
            if "#" in name and any(m in err for m in ("unsupported keyword", "allows no value", "no enum value",
                                                       "satisfies the bounds", "does not have the schema's type")):
                unsupported_cases.add(name)
                continue
            failures.append(f"{name} {model.name}: exit {outputs.returncode}: {err.strip()[-300:]}")
            continue
        used.add(name)
        for seed, (text, finish) in zip(seeds, outputs):
            if finish != "stop":
                cut += 1
                if bounded(schema):
                    failures.append(f"{name} {model.name} seed {seed}: bounded schema ended by {finish}: {text[:200]!r}")
                continue
            stopped += 1
            try:
                value = json.loads(text)
                jsonschema.validate(value, schema, cls=jsonschema.Draft7Validator,
                                    format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
            except Exception as e:  # noqa: BLE001 - any failure to parse or validate is the finding
                failures.append(f"{name} {model.name} seed {seed}: {type(e).__name__}: {str(e)[:300]}\n"
                                f"  output: {text[:300]!r}")

    suite_used = len([n for n in used if "#" in n])
    print(f"{corpus} corpus schemas, {suite_used} test-suite schemas used ({len(unsupported_cases)} refused as "
          f"unsupported); {stopped + cut} outputs: {stopped} stopped and validated, {cut} hit the token limit")
    for f in failures:
        print("FAIL", f)
    assert corpus >= 30, "the corpus needs at least 30 schemas"
    assert suite_used >= 50, f"only {suite_used} test-suite schemas are supported"
    assert used >= set(n for n, _, _ in cases[:corpus]), "every corpus schema must be used"
    assert cut * 4 <= stopped, "too many outputs ran into the token limit"
    sys.exit(1 if failures else 0)
