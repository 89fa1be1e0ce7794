// `ember serve` driven by the official `openai` npm package: streaming and non-streaming chat and text
// completions on chat-skills give the one-shot CLI's greedy answers, a completion from token ids, a
// chat with n: 2, models.retrieve; SIGTERM exits 0.
// Env: EMBER_BINARY, EMBER_SHARED_DIR, EMBER_NODE_DIR (where setup.sh installed the packages).
// Exit 77 (skipped) when the packages are not installed.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { nodePackage, startServer, cliChat as runCliChat } from "./ember_process.mjs";

const OpenAI = nodePackage("openai");

const ember = process.env.EMBER_BINARY;
const model = path.join(process.env.EMBER_SHARED_DIR, "models", "chat-skills");
const maxTokens = 200;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-openai-"));

// Cases spread over the evaluation file.
const lines = fs.readFileSync(path.join(process.env.EMBER_SHARED_DIR, "testdata/chat_skills/eval.jsonl"), "utf8")
  .split("\n").filter((l) => l.trim());
const cases = lines.filter((_, i) => i % 11 === 0).map((l) => JSON.parse(l));

function cliChat(c, i) {
  return runCliChat(ember, model, path.join(tmp, `case${i}.json`), c.messages,
                    ["-n", String(maxTokens), c.enable_thinking ? "--think" : "--no-think"]);
}

const { child, port } = await startServer(ember, model, ["--parallel", "4"]);
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.message}`); }
}

await check("models.list", async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, "chat-skills");
});

await check("models.retrieve", async () => {
  const m = await client.models.retrieve("chat-skills");
  assert.equal(m.id, "chat-skills");
  await assert.rejects(client.models.retrieve("no-such-model"), (e) => e.status === 404);
});

await check("unsupported field is a 400 naming it", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "chat-skills", messages: cases[0].messages, max_tokens: 4,
                                     prediction: { type: "content", content: "x" } }),
    (e) => e.status === 400 && e.param === "prediction");
});

for (const [i, c] of cases.entries()) {
  const expected = cliChat(c, i);
  const params = { model: "chat-skills", messages: c.messages, max_tokens: maxTokens,
                   chat_template_kwargs: { enable_thinking: c.enable_thinking } };
  await check(`chat ${c.id}`, async () => {
    const r = await client.chat.completions.create(params);
    assert.equal(r.choices[0].message.content, expected.content);
    assert.equal(r.choices[0].message.reasoning_content ?? "", expected.reasoning_content);
    assert.ok(r.usage.completion_tokens > 0);
  });
  await check(`chat stream ${c.id}`, async () => {
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let content = "", reasoning = "", finish = null, usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        content += ch.delta.content ?? "";
        reasoning += ch.delta.reasoning_content ?? "";
        finish = ch.finish_reason ?? finish;
      }
    }
    assert.equal(content, expected.content);
    assert.equal(reasoning, expected.reasoning_content);
    assert.ok(finish === "stop" || finish === "length");
    assert.ok(usage && usage.completion_tokens > 0);
  });
}

await check("completions (non-streaming and streaming) equal `ember generate`", async () => {
  const prompt = "Once upon a time";
  const out = execFileSync(ember, ["generate", "-m", model, "-p", prompt, "-n", "40", "-q"], { encoding: "utf8" });
  const expected = out.slice(prompt.length).replace(/\n$/, "");
  const r = await client.completions.create({ model: "chat-skills", prompt, max_tokens: 40 });
  assert.equal(r.choices[0].text, expected);
  let text = "";
  for await (const chunk of await client.completions.create({ model: "chat-skills", prompt, max_tokens: 40, stream: true }))
    text += chunk.choices[0]?.text ?? "";
  assert.equal(text, expected);
});

await check("a completion from token ids equals the text prompt's", async () => {
  const prompt = "Once upon a time";
  const ids = (await (await fetch(`http://127.0.0.1:${port}/tokenize`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content: prompt, add_special: true }) })).json()).tokens;
  assert.ok(ids.length > 0);
  const byText = await client.completions.create({ model: "chat-skills", prompt, max_tokens: 24 });
  const byIds = await client.completions.create({ model: "chat-skills", prompt: ids, max_tokens: 24 });
  assert.equal(byIds.choices[0].text, byText.choices[0].text);
  assert.equal(byIds.usage.prompt_tokens, ids.length);
});

await check("a chat with n: 2 gives two choices (greedy: both the CLI's answer; sampled with a seed: reproducible)", async () => {
  const c = cases[0];
  const expected = cliChat(c, 0);
  const params = { model: "chat-skills", messages: c.messages, max_tokens: maxTokens, n: 2,
                   chat_template_kwargs: { enable_thinking: c.enable_thinking } };
  const r = await client.chat.completions.create(params);
  assert.deepEqual(r.choices.map((ch) => ch.index), [0, 1]);
  for (const ch of r.choices) assert.equal(ch.message.content, expected.content);
  const sampled = { ...params, temperature: 1, seed: 5, max_tokens: 32 };
  const a = await client.chat.completions.create(sampled), b = await client.chat.completions.create(sampled);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((ch) => ch.message.content), b.choices.map((ch) => ch.message.content));
  const contents = [];
  for await (const chunk of await client.chat.completions.create({ ...sampled, stream: true }))
    for (const ch of chunk.choices) contents[ch.index] = (contents[ch.index] ?? "") + (ch.delta.content ?? "");
  assert.deepEqual(contents, a.choices.map((ch) => ch.message.content));
});

await check("errors surface as APIError with status", async () => {
  await assert.rejects(client.chat.completions.create({ model: "chat-skills", messages: "nope" }),
                       (e) => e.status === 400 && typeof e.message === "string");
});

child.kill("SIGTERM");
const { code, signal } = await exited;
await check("SIGTERM exits 0", async () => assert.equal(code, 0, `code ${code} signal ${signal}`));
fs.rmSync(tmp, { recursive: true, force: true });
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
