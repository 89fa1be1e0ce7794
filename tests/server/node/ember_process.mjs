// Running the ember binary from the node tests: `ember serve` on a free port, `ember chat --messages`.
import { spawn, execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

// Starts `ember serve -m model --port 0 ...args` and resolves with { child, port } once it listens.
export function startServer(ember, model, args = []) {
  return new Promise((resolve, reject) => {
    const child = spawn(ember, ["serve", "-m", model, "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    const timer = setTimeout(() => reject(new Error("server did not start: " + err)), 60000);
    child.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) { clearTimeout(timer); resolve({ child, port: Number(m[1]) }); }
    });
    child.on("exit", (code) => reject(new Error(`server exited with ${code}: ${err}`)));
  });
}

// The one-shot CLI reply ({content, reasoning_content, ...}) to `messages`, written to file.
export function cliChat(ember, model, file, messages, args = []) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(messages));
  const out = execFileSync(ember, ["chat", "-m", model, "--messages", file, "--json", "-q", ...args], { encoding: "utf8" });
  return JSON.parse(out.trim().split("\n").pop());
}

// `name` from the packages tests/server/node/setup.sh installed in EMBER_NODE_DIR; exits 77 (the
// test is skipped) when they are not installed.
export function nodePackage(name) {
  const nodeDir = process.env.EMBER_NODE_DIR;
  if (!nodeDir || !fs.existsSync(path.join(nodeDir, "node_modules", name))) {
    console.log(`${name} package not installed in ${nodeDir}: run tests/server/node/setup.sh`);
    process.exit(77);
  }
  return createRequire(path.join(nodeDir, "package.json"))(name);
}

// Debian's chromium and setup.sh's playwright-core for the browser tests: { chromium, chromiumPath }.
// Exits 77 (skipped) only when chromium is not installed; a missing playwright-core is a failure.
export function browserForTests() {
  const chromiumPath = process.env.EMBER_CHROMIUM || "/usr/bin/chromium";
  if (!fs.existsSync(chromiumPath)) {
    console.log(`${chromiumPath} is not installed (scripts/install-deps.sh installs Debian's chromium): skipped`);
    process.exit(77);
  }
  const nodeDir = process.env.EMBER_NODE_DIR;
  if (!nodeDir || !fs.existsSync(path.join(nodeDir, "node_modules", "playwright-core"))) {
    console.log(`FAIL: playwright-core is not installed in ${nodeDir}: run tests/server/node/setup.sh`);
    process.exit(1);
  }
  return { chromium: createRequire(path.join(nodeDir, "package.json"))("playwright-core").chromium, chromiumPath };
}

// A random-weight model with tiny-qwen3's shapes, the real Qwen3 tokenizer and Qwen3's chat template
// (tool calls in Qwen's format), or the chat template file `template`, written at `dir`/`name` by
// bench/write_model_folder. Returns its folder and the ids of the tokenizer's added tokens by text.
export function writeRandomQwen3(shared, writer, dir, template = path.join(shared, "chat_templates/qwen3.jinja"),
                                 name = "model") {
  const config = JSON.parse(fs.readFileSync(path.join(shared, "models/tiny-qwen3-bf16/config.json"), "utf8"));
  const tok = JSON.parse(fs.readFileSync(path.join(shared, "tokenizers/qwen3/tokenizer.json"), "utf8"));
  const added = Object.fromEntries(tok.added_tokens.map((a) => [a.content, a.id]));
  config.vocab_size = [...Object.values(added), ...Object.values(tok.model.vocab)].reduce((a, b) => Math.max(a, b), 0) + 1;
  config.eos_token_id = added["<|im_end|>"];
  const src = path.join(dir, `${name}-src`);
  fs.mkdirSync(src, { recursive: true });
  fs.writeFileSync(path.join(src, "config.json"), JSON.stringify(config));
  const model = path.join(dir, name);
  execFileSync(writer, [src, path.join(shared, "tokenizers/qwen3/tokenizer.json"),
    path.join(shared, "tokenizers/qwen3/tokenizer_config.json"), template, model], { stdio: "ignore" });
  return { model, added };
}
