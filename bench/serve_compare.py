#!/usr/bin/env python3
"""`ember serve` against llama.cpp's `llama-server` on the same weights, threads and slots: C
concurrent streaming clients per run (end tokens banned, so every reply is --tokens long), aggregate
generated tokens/s, the median and 90th-percentile time to first token, and each server's peak RSS.
The engines run one after the other, each alone on the machine. llama-server gets a GGUF file; Ember
the Hugging Face folder it was made from, with --quantize for a quantized file, as `llama-peer.sh
compare` does. Both get the same prompts as the same token ids: each client's chat is rendered with
the folder's chat template and tokenized by Ember (/apply-template, /tokenize), and sent to both as
/v1/completions with a prompt of token ids; the script checks that both servers count the same prompt
tokens, and says whether llama-server's own rendering and tokenizer (--jinja --chat-template-file)
give the same ids. Every run's prompts are new (no prompt cache hit from an earlier run).

  bench/serve_compare.py --model /tmp/llama32-1b --quantize q4_0 \
      --gguf ~/.cache/ember-peer/compare/llama32-1b/q4_0.gguf --eos 128001,128008,128009 \
      [--clients 4,16] [--tokens 128] [--threads 2] [--parallel 16] [--ctx 512]

llama-server comes from ../shared/peer/llama-peer.sh (built once with `llama-peer.sh build`)."""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, path, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("server did not become ready")


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def prompt_ids(port, messages, add_special=False):
    """The chat rendered with the server's template and tokenized by the server (special tokens in
    the rendered text parsed; add_special: the tokenizer's BOS added too)."""
    text = post(port, "/apply-template", {"messages": messages})["prompt"]
    return post(port, "/tokenize", {"content": text, "add_special": add_special})["tokens"]


def peak_rss_mib(pgid):
    """The largest VmHWM among the processes of a process group (llama-peer.sh runs llama-server as
    a child)."""
    peak = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) / 1024)
        except (OSError, ValueError):
            pass
    return peak


def stream_completion(port, body, out):
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    ttft, tokens, prompt, buf = None, 0, 0, b""
    if r.status != 200:
        out.append({"ok": False, "error": f"HTTP {r.status}: {r.read()[:200]!r}"})
        return
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: {"):
                continue
            j = json.loads(ev[6:])
            if j.get("usage"):
                tokens, prompt = j["usage"]["completion_tokens"], j["usage"]["prompt_tokens"]
            for ch in j.get("choices", []):
                if ttft is None and ch.get("text"):
                    ttft = time.time() - t0
    out.append({"ok": tokens > 0, "tokens": tokens, "prompt": prompt,
                "ttft": ttft if ttft is not None else time.time() - t0})


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def chats(clients, run):
    """Each client's chat of a run: the same length, none a prefix of another run's."""
    return [[{"role": "user", "content": f"Run {run}: tell me a story about a cat, number {i}."}] for i in range(clients)]


def load(port, prompts, tokens, extra):
    results, threads = [], []
    t0 = time.time()
    for ids in prompts:
        body = {"prompt": ids, "max_tokens": tokens, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}, **extra}
        threads.append(threading.Thread(target=stream_completion, args=(port, body, results)))
        threads[-1].start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    bad = [r for r in results if not r["ok"]]
    if bad:
        raise SystemExit(f"{len(bad)} requests failed: {bad[0]}")
    ttfts = sorted(r["ttft"] for r in results)
    want = sum(len(p) for p in prompts)
    if sum(r["prompt"] for r in results) != want:
        raise SystemExit(f"the server counted {sum(r['prompt'] for r in results)} prompt tokens, not the {want} sent")
    return {"tokens_per_s": sum(r["tokens"] for r in results) / wall, "ttft_p50": statistics.median(ttfts),
            "prompt": statistics.mean(r["prompt"] for r in results),
            "ttft_p90": ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True, help="the weights llama-server runs")
    ap.add_argument("--model", required=True, help="the same weights for Ember: a folder or GGUF file")
    ap.add_argument("--quantize", help="Ember's --quantize (q8_0, q4_0, q4_k) for a quantized GGUF")
    ap.add_argument("--act-dtype", choices=["f32", "bf16"], default="f32",
                    help="Ember's --act-dtype (bf16: BF16-rounded activations, llama.cpp's precision for BF16 weights)")
    ap.add_argument("--eos", required=True, help="end token ids, comma-separated (banned in Ember's requests)")
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=512, help="tokens per sequence")
    ap.add_argument("--ember", default=os.path.join(ROOT, "build/release/apps/ember/ember"))
    ap.add_argument("--peer", default=os.path.join(ROOT, "../shared/peer/llama-peer.sh"))
    a = ap.parse_args()
    clients = [int(c) for c in a.clients.split(",")]
    # The folder's template: chat_template.jinja, or tokenizer_config.json's chat_template string.
    template, path = [], os.path.join(a.model, "chat_template.jinja")
    config = os.path.join(a.model, "tokenizer_config.json")
    source = json.load(open(config)).get("chat_template") if os.path.exists(config) else None
    if not os.path.exists(path) and isinstance(source, str):
        path = os.path.join(tempfile.mkdtemp(prefix="serve-compare-"), "chat_template.jinja")
        with open(path, "w") as f:
            f.write(source)
    if os.path.exists(path):
        template = ["--jinja", "--chat-template-file", path]
    engines = {
        "llama-server": ([a.peer, "server", "-m", a.gguf, "-t", str(a.threads), "-np", str(a.parallel),
                          "-c", str(a.ctx * a.parallel), "--host", "127.0.0.1"] + template, "/health",
                         {"ignore_eos": True}),
        "ember": ([a.ember, "serve", "-m", a.model, "-t", str(a.threads), "--parallel", str(a.parallel),
                   "--ctx", str(a.ctx), "-q", "--act-dtype", a.act_dtype] + (["--quantize", a.quantize] if a.quantize else []),
                  "/v1/models",
                  {"logit_bias": {e: -100 for e in a.eos.split(",")}}),
    }
    # Ember first: its renderer and tokenizer make the token ids both servers get.
    runs = {"warm-up": chats(1, "warm-up"), **{c: chats(c, c) for c in clients}}
    ids, table, rss = {}, {}, {}
    for name in ("ember", "llama-server"):
        cmd, ready, extra = engines[name]
        port = free_port()
        # Its own process group: the peer script runs llama-server as a child, and both must stop.
        proc = subprocess.Popen(cmd + ["--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_ready(port, proc, ready)
            if name == "ember":
                ids = {run: [prompt_ids(port, m) for m in ms] for run, ms in runs.items()}
            else:
                # llama-server renders the template without its BOS text and adds BOS as it tokenizes.
                own = [prompt_ids(port, m, add_special=True) for ms in runs.values() for m in ms]
                same = sum(a == b for a, b in zip(own, (p for ps in ids.values() for p in ps)))
                print(f"llama-server's own template and tokenizer give the same ids for {same} of {len(own)} prompts",
                      flush=True)
            load(port, ids["warm-up"], 8, extra)
            for c in clients:
                table[(name, c)] = load(port, ids[c], a.tokens, extra)
                r = table[(name, c)]
                print(f"{name:12} clients {c:3}: {r['tokens_per_s']:7.2f} tok/s  ttft p50 {r['ttft_p50']:6.2f} s"
                      f"  p90 {r['ttft_p90']:6.2f} s  prompt {r['prompt']:.1f} tokens", flush=True)
            rss[name] = peak_rss_mib(proc.pid)
            print(f"{name:12} peak RSS {rss[name]:.0f} MiB", flush=True)
        finally:
            stop(proc)
    for c in clients:
        e, l = table[("ember", c)], table[("llama-server", c)]
        print(f"clients {c:3}: ember / llama-server tokens/s {e['tokens_per_s'] / l['tokens_per_s']:.2f}, "
              f"ttft p50 {e['ttft_p50']:.2f} s vs {l['ttft_p50']:.2f} s, p90 {e['ttft_p90']:.2f} s vs {l['ttft_p90']:.2f} s")
    print(f"peak RSS: ember {rss['ember']:.0f} MiB, llama-server {rss['llama-server']:.0f} MiB")


if __name__ == "__main__":
    main()
