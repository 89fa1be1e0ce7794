#!/usr/bin/env python3
"""Serves random-weight copies of real models at their real sizes with default flags (only the port is
chosen): Llama-3.2-1B-Instruct (a 131072-token trained context) and Qwen2.5-0.5B-Instruct (32768).
Each folder is bench/models/<name>'s configuration files, the real tokenizer and chat template from
../shared, and random BF16 weights (write_model_folder). `ember serve` must start (its memory plan
sizes the context from the memory available instead of asking for the trained context of every
sequence), answer 4 concurrent chats, and keep its peak resident memory within the printed plan
(weights plus the KV pool at full use) plus 10%; its resident memory after the chats must follow
what the conversations used, not the pool's size.

Usage: serve_real_models_test.py EMBER WRITE_MODEL_FOLDER SOURCE_DIR SHARED_DIR"""
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request

from serve_process import start_serve, stop

ember, writer, src, shared = sys.argv[1:5]
MODELS = [("llama-3.2-1b-instruct", "llama-3.2", "llama3.2-instruct.jinja"),
          ("qwen2.5-0.5b-instruct", "qwen3", "qwen2.5.jinja")]


def status_kib(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def size(text, pattern):
    """Bytes of the first "<number> <unit>" (B, KiB, MiB, GiB, TiB) that `pattern` captures."""
    m = re.search(pattern, text)
    assert m, f"no match for {pattern!r} in {text!r}"
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    return float(m.group(1)) * units[m.group(2)]


def serve_and_chat(folder, name):
    proc, url, lines = start_serve(ember, folder)
    try:
        plan = next((l for l in lines if l.startswith("memory plan:")), None)
        assert plan is not None, "no memory plan line: " + "".join(lines)
        print(name, plan.strip())
        context = int(re.search(r"KV cache f16, (\d+) tokens", plan).group(1))
        trained = json.load(open(folder / "config.json"))["max_position_embeddings"]
        assert 256 <= context <= trained, plan

        answers, errors = [None] * 4, []

        def chat(i):
            body = json.dumps({"model": name, "max_tokens": 12,
                               "messages": [{"role": "user", "content": f"Hello number {i}, tell me a story."}]})
            req = urllib.request.Request(url + "v1/chat/completions", body.encode(),
                                         {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    answers[i] = json.load(r)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(f"chat {i}: {e}")

        threads = [threading.Thread(target=chat, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for a in answers:
            assert a["choices"][0]["message"]["role"] == "assistant", a
            assert a["choices"][0]["finish_reason"] in ("stop", "length"), a
            assert a["usage"]["completion_tokens"] >= 1, a

        peak, now = status_kib(proc.pid, "VmHWM") * 1024, status_kib(proc.pid, "VmRSS") * 1024
        weights = size(plan, r"weights ([\d.]+) ([KMGT]?i?B)")
        kv = size(plan, r"\(([\d.]+) ([KMGT]?i?B) at full use")
        print(f"{name}: peak resident {peak / 1e9:.2f} GB, now {now / 1e9:.2f} GB; plan: weights "
              f"{weights / 1e9:.2f} GB + KV pool {kv / 1e9:.2f} GB")
        assert peak <= 1.10 * (weights + kv), "peak resident memory past the plan plus 10%"
        # Four short chats touch a few MB of the pool: resident memory is the weights plus that.
        assert now <= 1.10 * weights + 300e6, "resident memory follows the pool's size, not its use"
    finally:
        stop(proc)


with tempfile.TemporaryDirectory(prefix="ember-real-models-") as tmp:
    for name, tokenizer, template in MODELS:
        folder = pathlib.Path(tmp) / name
        subprocess.run([writer, f"{src}/bench/models/{name}", f"{shared}/tokenizers/{tokenizer}/tokenizer.json",
                        f"{shared}/chat_templates/{template}", str(folder)], check=True)
        serve_and_chat(folder, name)
        shutil.rmtree(folder)
print("ok")
