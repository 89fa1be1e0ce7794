// gpt-oss's harmony format end to end through `ember serve --chat-template` and `ember chat`: the
// analysis channel as reasoning_content beside the final channel's content (streamed and not, through
// the official `openai` npm client), a streamed tool call from the commentary channel, the thinking
// budget, and `ember chat` piped. The model is tiny-gptoss-bf16 (random weights, a story tokenizer
// without harmony's special tokens, so the markers are plain text) with the gpt-oss template fixture
// as --chat-template, and for the calls (whose `to=` that tokenizer cannot spell) a random model with
// the Qwen3 tokenizer and the fixture as its own chat template (the template decides the format;
// bench/write_model_folder writes no gpt-oss weights). Replies are forced with
// llama-server's `grammar` field (and --grammar) or a forced call.
// Env: EMBER_BINARY, EMBER_WRITE_MODEL_FOLDER, EMBER_SHARED_DIR, EMBER_SOURCE_DIR, EMBER_NODE_DIR.
// Exit 77 (skipped) when the packages are not installed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { nodePackage, startServer, writeRandomQwen3 } from "./ember_process.mjs";

const OpenAI = nodePackage("openai");
const ember = process.env.EMBER_BINARY;
const model = path.join(process.env.EMBER_SHARED_DIR, "models", "tiny-gptoss-bf16");
const template = path.join(process.env.EMBER_SOURCE_DIR, "tests", "chat", "templates", "gpt-oss.jinja");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-harmony-"));

const thought = "The user greets me. Greet back.";
const answer = "Hello there!";
const harmony = `<|channel|>analysis<|message|>${thought}<|end|><|start|>assistant<|channel|>final<|message|>${answer}`;
const grammar = `root ::= ${JSON.stringify(harmony)}\n`;

const { child, port } = await startServer(ember, model, ["--chat-template", template, "--ctx", "2048"]);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const user = [{ role: "user", content: "Hi! What is the weather in Paris?" }];

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}

await check("reasoning_content apart from content, not streamed", async () => {
  const r = await client.chat.completions.create({ model: "m", messages: user, max_tokens: 100, grammar });
  assert.equal(r.choices[0].message.reasoning_content, thought);
  assert.equal(r.choices[0].message.content, answer);
  assert.equal(r.choices[0].finish_reason, "stop");
});

await check("reasoning_content apart from content, streamed", async () => {
  const stream = await client.chat.completions.create({ model: "m", messages: user, max_tokens: 100, grammar, stream: true });
  let reasoning = "", content = "";
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.reasoning_content) reasoning += d.reasoning_content;
    if (d.content) content += d.content;
  }
  assert.equal(reasoning, thought);
  assert.equal(content, answer);
});

await check("reasoning_effort reaches the template; a bad one is refused by name", async () => {
  for (const effort of ["low", "medium", "high"]) {
    const r = await fetch(`http://127.0.0.1:${port}/apply-template`, { method: "POST",
      body: JSON.stringify({ messages: user, reasoning_effort: effort }) });
    const prompt = (await r.json()).prompt;
    assert.ok(prompt.includes(`Reasoning: ${effort}\n`), prompt);
    assert.ok(prompt.endsWith("<|start|>assistant"), prompt);
  }
  await assert.rejects(client.chat.completions.create({ model: "m", messages: user, reasoning_effort: "extreme" }),
                       (e) => e.status === 400 && e.param === "reasoning_effort");
  await assert.rejects(client.responses.create({ model: "m", input: "Hi", reasoning: { effort: "extreme" } }),
                       (e) => e.status === 400 && e.param === "reasoning.effort");
});
child.kill();

// The thinking budget ends the analysis message and opens the final channel: a template whose
// generation prompt opens the analysis, so that the random model's text is all thought until then.
await check("the thinking budget closes the analysis channel", async () => {
  const opened = path.join(tmp, "opened.jinja");
  fs.writeFileSync(opened, fs.readFileSync(template, "utf8").replace(
    "<|start|>assistant{% endif %}", "<|start|>assistant<|channel|>analysis<|message|>{% endif %}"));
  const srv = await startServer(ember, model, ["--chat-template", opened, "--ctx", "2048"]);
  try {
    const c = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
    const r = await c.chat.completions.create({ model: "m", messages: user, max_tokens: 40, temperature: 1, seed: 3,
                                                thinking_budget: 8 });
    const m = r.choices[0].message;
    assert.ok(m.reasoning_content && m.reasoning_content.length > 0, JSON.stringify(r));
    assert.ok(!m.reasoning_content.includes("<|"), JSON.stringify(r));
    assert.ok(r.usage.completion_tokens > 8 + 3, JSON.stringify(r));  // the forced close is several tokens
    assert.ok(m.content && m.content.length > 0 && !m.content.includes("<|channel|>"), JSON.stringify(r));
  } finally {
    srv.child.kill();
  }
});

// A streamed reply's tool calls: their names, ids and arguments put together, its content and reasons.
async function streamedCalls(stream) {
  const calls = [];
  let content = "", reasoning = "", finish = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta?.content) content += choice.delta.content;
    if (choice.delta?.reasoning_content) reasoning += choice.delta.reasoning_content;
    for (const t of choice.delta?.tool_calls ?? []) {
      calls[t.index] ??= { id: "", name: "", arguments: "" };
      if (t.id) calls[t.index].id = t.id;
      if (t.function?.name) calls[t.index].name += t.function.name;
      if (t.function?.arguments) calls[t.index].arguments += t.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { calls, content, reasoning, finish };
}

await check("streamed tool calls from the commentary channel (forced, and after a thought), a structured answer", async () => {
  const { model: harmonyModel } = writeRandomQwen3(process.env.EMBER_SHARED_DIR, process.env.EMBER_WRITE_MODEL_FOLDER,
                                                   tmp, template, "harmony");
  const srv = await startServer(ember, harmonyModel, ["--ctx", "2048"]);
  const gc = new OpenAI({ baseURL: `http://127.0.0.1:${srv.port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
  try {
    const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
      parameters: { type: "object", additionalProperties: false, required: ["city"],
                    properties: { city: { type: "string", enum: ["Paris", "Oslo"] } } } } }];
    const forced = await streamedCalls(await gc.chat.completions.create({ model: "m", messages: user, tools,
      tool_choice: "required", parallel_tool_calls: false, max_tokens: 100, stream: true }));
    assert.equal(forced.finish, "tool_calls");
    assert.equal(forced.content, "");
    assert.equal(forced.calls.length, 1);
    assert.equal(forced.calls[0].name, "get_weather");
    assert.ok(forced.calls[0].id);
    assert.ok(["Paris", "Oslo"].includes(JSON.parse(forced.calls[0].arguments).city), forced.calls[0].arguments);

    // A structured answer: the prompt opens the final channel, and the JSON is the content.
    const structured = await gc.chat.completions.create({ model: "m", messages: user, max_tokens: 100,
      response_format: { type: "json_schema", json_schema: { name: "w", schema: tools[0].function.parameters } } });
    assert.ok(["Paris", "Oslo"].includes(JSON.parse(structured.choices[0].message.content).city), JSON.stringify(structured));
    assert.equal(structured.choices[0].message.reasoning_content, undefined);

    // tool_choice auto: the analysis, then a call in the channel header, as gpt-oss writes them.
    const call = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary " +
                 "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>";
    const auto = await streamedCalls(await gc.chat.completions.create({ model: "m", messages: user, tools,
      max_tokens: 400, stream: true, grammar: `root ::= ${JSON.stringify(call)}\n` }));
    assert.equal(auto.finish, "tool_calls");
    assert.equal(auto.reasoning, "Need the weather.");
    assert.equal(auto.content, "");
    assert.deepEqual(auto.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_weather", { city: "Oslo" }]]);
  } finally {
    srv.child.kill();
  }
});

await check("ember chat piped on the gpt-oss template: the answer, the thought with --show-think", async () => {
  const g = path.join(tmp, "reply.gbnf");
  fs.writeFileSync(g, grammar);
  const args = ["chat", "-m", model, "--chat-template", template, "--grammar", g, "-q", "--reasoning-effort", "low"];
  // Two turns: the second renders the first reply back through the template.
  const hidden = execFileSync(ember, args, { input: "Hi\nAgain\n", encoding: "utf8" });
  assert.equal(hidden, `${answer}\n${answer}\n`);
  const shown = execFileSync(ember, [...args, "--show-think"], { input: "Hi\n", encoding: "utf8" });
  assert.equal(shown, `${thought}\n${answer}\n`);
  const msgs = path.join(tmp, "messages.json");
  fs.writeFileSync(msgs, JSON.stringify(user));
  const json = JSON.parse(execFileSync(ember, [...args, "--messages", msgs, "--json"], { encoding: "utf8" }).trim());
  assert.equal(json.reasoning_content, thought);
  assert.equal(json.content, answer);
  const bad = spawnSync(ember, ["chat", "-m", model, "--reasoning-effort", "extreme"], { input: "", encoding: "utf8" });
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /--reasoning-effort/);
});

fs.rmSync(tmp, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
