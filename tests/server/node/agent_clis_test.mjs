// The coding agents people point at a local server, unmodified, against `ember serve`: OpenAI's
// Codex CLI (`codex exec`, Responses API, a custom model provider) and Anthropic's Claude Code
// (`claude -p`, Messages API, ANTHROPIC_BASE_URL). Each must finish one non-interactive request with
// exit status 0 and show the model's reply: the answer is nonsense (a random-weight model with
// Qwen3's tokenizer and template, whose generation_config makes every third token an end token so
// that replies stay short), the protocol is what is tested: the agents' full requests (long system
// prompts, dozens of tools, streaming) go through Ember's parsers and come back in the events the
// agents expect. A recording proxy between agent and server keeps the streamed replies, and the text
// an agent prints must be the text of one of them. Env: EMBER_BINARY, EMBER_WRITE_MODEL_FOLDER, EMBER_SHARED_DIR, EMBER_NODE_DIR. Exit
// 77 (skipped) when the agents are not installed (tests/server/node/setup.sh installs them).
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer, writeRandomQwen3 } from "./ember_process.mjs";

const bin = (name) => path.join(process.env.EMBER_NODE_DIR || "", "node_modules", ".bin", name);
for (const name of ["codex", "claude"])
  if (!fs.existsSync(bin(name))) {
    console.log(`${bin(name)} is not installed: run tests/server/node/setup.sh`);
    process.exit(77);
  }

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-agent-clis-"));
const { model } = writeRandomQwen3(process.env.EMBER_SHARED_DIR, process.env.EMBER_WRITE_MODEL_FOLDER, tmp);
const config = JSON.parse(fs.readFileSync(path.join(model, "config.json"), "utf8"));
const ends = [...Array(config.vocab_size).keys()].filter((i) => i % 3 === 0);
fs.writeFileSync(path.join(model, "generation_config.json"), JSON.stringify({ eos_token_id: [...ends, config.eos_token_id] }));

const { child, port: emberPort } = await startServer(process.env.EMBER_BINARY, model);
child.on("exit", (code, signal) => console.log(`ember serve exited: ${code ?? signal}`));

// Forwards to Ember and keeps each reply's streamed text (Responses' output_text deltas, Messages'
// text_delta blocks).
const replies = [];
const proxy = http.createServer((req, res) => {
  const up = http.request({ host: "127.0.0.1", port: emberPort, path: req.url, method: req.method, headers: req.headers },
    (r) => {
      res.writeHead(r.statusCode, r.headers);
      let body = "";
      r.on("data", (d) => { body += d; res.write(d); });
      r.on("end", () => {
        res.end();
        let text = "";
        for (const line of body.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          let ev;
          try { ev = JSON.parse(line.slice(6)); } catch { continue; }
          if (ev.type === "response.output_text.delta") text += ev.delta;
          if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
        }
        replies.push(text);
      });
    });
  up.on("error", (e) => { res.writeHead(502); res.end(String(e)); });
  req.pipe(up);
});
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
const port = proxy.address().port;
const home = path.join(tmp, "home"), work = path.join(tmp, "work");
fs.mkdirSync(home);
fs.mkdirSync(work);
const env = { PATH: process.env.PATH, HOME: home, DISABLE_TELEMETRY: "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" };

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}
async function finished() {
  const text = await (await fetch(`http://127.0.0.1:${emberPort}/metrics`)).text();
  return Number(text.match(/^ember_requests_finished_total (\S+)$/m)[1]);
}
// Runs an agent (asynchronously: the proxy serves it meanwhile); its status and output.
function run(cmd, args, extraEnv) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { cwd: work, env: { ...env, ...extraEnv }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d) => { out += d; });
    p.stderr.on("data", (d) => { err += d; });
    const timer = setTimeout(() => p.kill("SIGKILL"), 240000);
    p.on("close", (status) => { clearTimeout(timer); resolve({ status, out, err, all: out + err }); });
  });
}
function checkShown(r, from) {
  const shown = r.out.trim();
  const texts = replies.slice(from).map((t) => t.trim());
  assert.ok(texts.length > 0, "no reply went through the proxy");
  assert.ok(texts.includes(shown), `the agent printed ${JSON.stringify(shown)}; the replies were ${JSON.stringify(texts)}`);
}

await check("codex exec completes a request over the Responses API", async () => {
  const before = await finished(), from = replies.length;
  // The provider is Ember; web search and sub-agents off, as their tools are not functions.
  const r = await run(bin("codex"), ["exec", "--skip-git-repo-check", "-m", "model",
    "-c", "model_provider=ember",
    "-c", `model_providers.ember={name="ember",base_url="http://127.0.0.1:${port}/v1",wire_api="responses",env_key="EMBER_KEY"}`,
    "-c", "model_reasoning_effort=none", "-c", 'web_search="disabled"', "-c", "features.multi_agent=false",
    "Say hi"], { EMBER_KEY: "unused" });
  assert.equal(r.status, 0, r.all);
  assert.doesNotMatch(r.all, /^ERROR/m, r.all);
  checkShown(r, from);
  assert.ok((await finished()) > before, "the server answered the request");
});

await check("claude -p completes a request over the Messages API", async () => {
  const before = await finished(), from = replies.length;
  // Claude Code asks for 32000 output tokens unless told; this model's context is 40960.
  const r = await run(bin("claude"), ["-p", "Say hi", "--model", "model"],
    { ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`, ANTHROPIC_API_KEY: "unused", CLAUDE_CODE_MAX_OUTPUT_TOKENS: "256" });
  assert.equal(r.status, 0, r.all);
  assert.doesNotMatch(r.all, /API Error/, r.all);
  checkShown(r, from);
  assert.ok((await finished()) > before, "the server answered the request");
});

proxy.close();
child.kill("SIGTERM");
fs.rmSync(tmp, { recursive: true, force: true });
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
