// CORS in a real browser: a page served from another origin (a node http server on its own port)
// calls `ember serve`'s API with fetch and a JSON body (so Chromium sends a preflight OPTIONS first).
// With `--cors ORIGIN` the call succeeds; without --cors, and with --cors naming another origin,
// Chromium blocks it.
// Env: EMBER_BINARY, EMBER_SHARED_DIR, EMBER_NODE_DIR, EMBER_CHROMIUM. Exit 77 (skipped) only when
// chromium is not installed.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { browserForTests, startServer } from "./ember_process.mjs";

const { chromium, chromiumPath } = browserForTests();
const ember = process.env.EMBER_BINARY;
const model = path.join(process.env.EMBER_SHARED_DIR, "models", "chat-skills");

// The other origin: a blank page.
const site = http.createServer((_, res) => { res.writeHead(200, { "Content-Type": "text/html" }); res.end("<!doctype html><title>app</title>"); });
await new Promise((r) => site.listen(0, "127.0.0.1", r));
const origin = `http://127.0.0.1:${site.address().port}`;

const servers = {
  allowed: await startServer(ember, model, ["--cors", origin]),
  any: await startServer(ember, model, ["--cors", "*"]),
  none: await startServer(ember, model),
  other: await startServer(ember, model, ["--cors", "http://example.invalid"]),
};

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-cors-"));
const context = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
  executablePath: chromiumPath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = context.pages()[0] || (await context.newPage());
await page.goto(`${origin}/`);

// The page's own fetch to a server: {ok, status, content} or {error} when the browser blocked it.
const call = (port) => page.evaluate(async (url) => {
  try {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer x" },
                                 body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }) });
    const j = await r.json();
    return { ok: r.ok, status: r.status, content: j.choices?.[0]?.message?.content };
  } catch (e) {
    return { error: String(e) };
  }
}, `http://127.0.0.1:${port}/v1/chat/completions`);

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}
await check("--cors ORIGIN: the page's call succeeds", async () => {
  const r = await call(servers.allowed.port);
  assert.equal(r.error, undefined, r.error);
  assert.equal(r.status, 200);
  assert.equal(typeof r.content, "string");
});
await check("--cors '*': the page's call succeeds", async () => {
  const r = await call(servers.any.port);
  assert.equal(r.status, 200, JSON.stringify(r));
});
await check("without --cors the browser blocks the call", async () => {
  const r = await call(servers.none.port);
  assert.ok(r.error && /fetch/i.test(r.error), JSON.stringify(r));
});
await check("--cors naming another origin: blocked", async () => {
  const r = await call(servers.other.port);
  assert.ok(r.error, JSON.stringify(r));
});

await context.close();
for (const s of Object.values(servers)) s.child.kill("SIGTERM");
site.close();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
