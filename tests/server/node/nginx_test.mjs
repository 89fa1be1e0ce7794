// nginx (Debian's package) in front of two `ember serve` instances on loopback, routing by the
// X-Session-Id header with consistent hashing: each conversation's turns reach the same instance,
// and that instance's metrics show the second turn reused the first turn's KV cache.
// Env: EMBER_BINARY, EMBER_SHARED_DIR, EMBER_NGINX (the nginx binary). Uses no npm package.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";

const ember = process.env.EMBER_BINARY;
const model = path.join(process.env.EMBER_SHARED_DIR, "models", "chat-skills");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-nginx-"));
const children = [];

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(url) {
  for (let i = 0; i < 300; i++) { try { if ((await fetch(url)).ok) return; } catch {} await sleep(100); }
  throw new Error("not up: " + url);
}
const metric = (text, name) => Number((text.match(new RegExp(`\\n${name} ([0-9.e+-]+)\\n`)) || [])[1] ?? NaN);

try {
  const ports = [await freePort(), await freePort()];
  for (const p of ports)
    children.push(spawn(ember, ["serve", "-m", model, "--port", String(p), "-q"], { stdio: "ignore" }));
  const front = await freePort();
  // The configuration documented in docs/serving.md, with this test's ports and a private prefix.
  const conf = fs.readFileSync(new URL("../../../docs/nginx-ember.conf", import.meta.url), "utf8")
    .replace("server 127.0.0.1:8081;", `server 127.0.0.1:${ports[0]};`)
    .replace("server 127.0.0.1:8082;", `server 127.0.0.1:${ports[1]};`)
    .replace("listen 127.0.0.1:8080;", `listen 127.0.0.1:${front};`);
  const full = `daemon off; pid ${tmp}/nginx.pid; error_log ${tmp}/error.log;\nevents {}\nhttp {\n` +
    `access_log off; client_body_temp_path ${tmp}/body; proxy_temp_path ${tmp}/proxy;\n` +
    `fastcgi_temp_path ${tmp}/fcgi; uwsgi_temp_path ${tmp}/uwsgi; scgi_temp_path ${tmp}/scgi;\n${conf}\n}\n`;
  fs.writeFileSync(path.join(tmp, "nginx.conf"), full);
  children.push(spawn(process.env.EMBER_NGINX, ["-p", tmp, "-c", path.join(tmp, "nginx.conf")], { stdio: "inherit" }));
  for (const p of ports) await waitFor(`http://127.0.0.1:${p}/health`);
  await waitFor(`http://127.0.0.1:${front}/health`);

  const chat = async (session, messages) => {
    const r = await fetch(`http://127.0.0.1:${front}/v1/chat/completions`, {
      method: "POST", headers: { "Content-Type": "application/json", "X-Session-Id": session },
      body: JSON.stringify({ messages, max_tokens: 64, chat_template_kwargs: { enable_thinking: false } }) });
    assert.equal(r.status, 200);
    return r.json();
  };
  const sessions = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar"];
  for (const s of sessions) {
    const messages = [{ role: "user", content: `Hi, I'm ${s}.` }];
    const first = await chat(s, messages);
    messages.push({ role: "assistant", content: first.choices[0].message.content },
                  { role: "user", content: "What is my name?" });
    const second = await chat(s, messages);
    // The template renders the history differently from the generation prompt (the empty thought
    // goes), so the reuse ends there: still most of the first turn's prompt.
    assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens / 2,
              `session ${s}: second turn reused ${second.usage.prompt_tokens_details.cached_tokens} tokens`);
  }
  const metrics = await Promise.all(ports.map(async (p) => (await fetch(`http://127.0.0.1:${p}/metrics`)).text()));
  const reused = metrics.map((m) => metric(m, "ember_prompt_tokens_reused_total"));
  const served = metrics.map((m) => metric(m, "ember_requests_finished_total"));
  console.log(`requests per instance ${served}, prompt tokens reused per instance ${reused}`);
  assert.equal(served[0] + served[1], 2 * sessions.length);
  assert.ok(served[0] > 0 && served[1] > 0, "consistent hashing spread the sessions over both instances");
  assert.ok(reused[0] > 0 && reused[1] > 0);
  console.log("all passed");
} finally {
  for (const c of children.reverse()) c.kill("SIGTERM");
  await sleep(300);
  fs.rmSync(tmp, { recursive: true, force: true });
}
