#!/usr/bin/env python3
"""Installs Ember from a build tree into a temporary prefix, builds examples/ as a separate CMake
project with find_package(ember), and checks the example's answers against the reference's greedy
answers to chat-skills' evaluation (testdata/chat_skills/golden_ids.jsonl: every single-turn case
without thinking, a system message passed as the example's argument), and on the memory cases of the
evaluation (eval.jsonl): fed their user turns, the example's last reply must be the expected answer,
recalling what an earlier turn said.

Usage: install_example_test.py BUILD_DIR SOURCE_DIR SHARED_DIR"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

build, src, shared = (pathlib.Path(p) for p in sys.argv[1:4])
model = shared / "models" / "chat-skills"
def jsonl(name):
    return [json.loads(l) for l in open(shared / "testdata" / "chat_skills" / name)]


golden, evaluation = jsonl("golden_ids.jsonl"), jsonl("eval.jsonl")
eos = json.load(open(model / "tokenizer_config.json"))["eos_token"]
eos = eos["content"] if isinstance(eos, dict) else eos

with tempfile.TemporaryDirectory() as tmp:
    prefix, example = pathlib.Path(tmp) / "prefix", pathlib.Path(tmp) / "build"
    subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix)], check=True, stdout=subprocess.DEVNULL)
    for header in (prefix / "include" / "ember").glob("*.h"):  # the API pulls no internal header
        for inc in re.findall(r'#include "([^"]+)"', header.read_text()):
            assert inc.startswith("ember/"), f"{header.name} includes {inc}"
    subprocess.run(["cmake", "-S", str(src / "examples"), "-B", str(example), "-G", "Ninja",
                    f"-DCMAKE_PREFIX_PATH={prefix}"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(example)], check=True, stdout=subprocess.DEVNULL)

    def replies(user_turns, system=None):
        args = [str(example / "chat"), str(model)] + ([system] if system else [])
        out = subprocess.run(args, input="".join(t + "\n" for t in user_turns), capture_output=True, text=True,
                             timeout=300, check=True)
        return out.stdout.split("\n")

    passed = failed = 0

    def check(case_id, expected, got):
        global passed, failed
        if got == expected:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {case_id}: expected {expected!r}, got {got!r}")

    for c in golden:
        msgs = c["messages"]
        system = msgs[0]["content"] if msgs[0]["role"] == "system" else None
        users = [m["content"] for m in msgs if m["role"] == "user"]
        if c.get("enable_thinking") is False and len(users) == 1:
            check(c["id"], c["answer_text"].removesuffix(eos), replies(users, system)[0])
    for c in evaluation:
        msgs = c["messages"]
        if c["skill"] == "memory" and c.get("enable_thinking") is False and msgs[0]["role"] != "system":
            users = [m["content"] for m in msgs if m["role"] == "user"]
            check(c["id"], c["expected"], replies(users)[len(users) - 1])
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or passed == 0 else 0)
