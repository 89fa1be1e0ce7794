// The APIs agents call, through their official clients, unmodified, against `ember serve`:
// OpenAI's Responses API (`openai`: responses.create, responses.stream, a function tool round trip,
// text.format json_schema) and Anthropic's Messages API (`@anthropic-ai/sdk`: messages.create,
// messages.stream, a tool_use round trip, thinking blocks, countTokens). Text answers come from
// chat-skills (greedy, so a streamed reply must equal the whole one); tool calls and schemas from a
// random-weight model with Qwen3's tokenizer and template, their shapes forced by the grammar.
// Env: EMBER_BINARY, EMBER_WRITE_MODEL_FOLDER, EMBER_SHARED_DIR, EMBER_NODE_DIR. Exit 77 (skipped)
// when the packages are not installed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { nodePackage, startServer, writeRandomQwen3 } from "./ember_process.mjs";

const OpenAI = nodePackage("openai");
const AnthropicModule = nodePackage("@anthropic-ai/sdk");
const Anthropic = AnthropicModule.Anthropic || AnthropicModule.default || AnthropicModule;
const shared = process.env.EMBER_SHARED_DIR;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-agent-sdks-"));
const { model: randomModel } = writeRandomQwen3(shared, process.env.EMBER_WRITE_MODEL_FOLDER, tmp);

const skills = await startServer(process.env.EMBER_BINARY, path.join(shared, "models/chat-skills"));
const tools = await startServer(process.env.EMBER_BINARY, randomModel, ["--ctx", "4096"]);
const clients = (port) => ({
  openai: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 }),
  anthropic: new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: "unused", maxRetries: 0, timeout: 120000 }),
});
const onSkills = clients(skills.port), onRandom = clients(tools.port);

const weather = { type: "object", additionalProperties: false, required: ["city", "days"],
  properties: { city: { type: "string", maxLength: 10 }, days: { type: "integer", minimum: 1, maximum: 7 } } };
function checkWeather(v) {
  assert.deepEqual(Object.keys(v).sort(), ["city", "days"], JSON.stringify(v));
  assert.ok(typeof v.city === "string" && [...v.city].length <= 10, JSON.stringify(v));
  assert.ok(Number.isInteger(v.days) && v.days >= 1 && v.days <= 7, JSON.stringify(v));
}

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}

// --- OpenAI Responses -------------------------------------------------------------------------
const question = "What is 47 plus 85?";
await check("responses.create: a reply with output_text and usage", async () => {
  const r = await onSkills.openai.responses.create({ model: "chat-skills", input: question, temperature: 0,
    max_output_tokens: 200 });
  assert.equal(r.object, "response");
  assert.equal(r.status, "completed", JSON.stringify(r));
  assert.ok(r.output_text.includes("132"), r.output_text);
  assert.ok(r.output.some((o) => o.type === "reasoning"), "chat-skills thinks first");
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0 && r.usage.total_tokens ===
            r.usage.input_tokens + r.usage.output_tokens, JSON.stringify(r.usage));
});

await check("responses.stream: the events rebuild the whole response", async () => {
  const params = { model: "chat-skills", input: [{ role: "user", content: question }], temperature: 0, max_output_tokens: 200 };
  const whole = await onSkills.openai.responses.create(params);
  const stream = onSkills.openai.responses.stream(params);
  let deltas = "";
  const types = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") deltas += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.equal(deltas, whole.output_text);
  // This client's stream helper adds no output_text: the message items' text.
  const text = final.output.filter((o) => o.type === "message").flatMap((o) => o.content).map((c) => c.text).join("");
  assert.equal(text, whole.output_text);
  assert.deepEqual(final.output.map((o) => o.type), whole.output.map((o) => o.type));
});

await check("responses.stream: an item max_output_tokens cut is incomplete when done and in the end", async () => {
  const stream = onSkills.openai.responses.stream({ model: "chat-skills", input: question, max_output_tokens: 3,
    reasoning: { effort: "none" } });
  const done = [];
  let last;
  for await (const ev of stream) {
    if (ev.type === "response.output_item.done") done.push(ev.item);
    last = ev;
  }
  assert.equal(last.type, "response.incomplete");
  assert.equal(done.at(-1).status, "incomplete", JSON.stringify(done));
  assert.equal(last.response.output.at(-1).status, "incomplete");
});

await check("responses: instructions and a multi-turn input", async () => {
  const r = await onSkills.openai.responses.create({ model: "chat-skills", temperature: 0, max_output_tokens: 200,
    instructions: "Answer in uppercase.", reasoning: { effort: "none" },
    input: [{ role: "user", content: "My name is Mila." }, { role: "assistant", content: "Nice to meet you, Mila." },
            { role: "user", content: [{ type: "input_text", text: "What is my name?" }] }] });
  assert.equal(r.status, "completed");
  assert.ok(!r.output.some((o) => o.type === "reasoning"), "effort none turns thinking off");
  assert.ok(r.output_text.length > 0);
});

await check("responses: a function tool round trip", async () => {
  const fn = { type: "function", name: "get_weather", description: "Forecast", parameters: weather, strict: true };
  const input = [{ role: "user", content: "Weather in Paris for 3 days?" }];
  const first = await onRandom.openai.responses.create({ model: "m", input, tools: [fn], tool_choice: "required",
    parallel_tool_calls: false, reasoning: { effort: "none" }, max_output_tokens: 120 });
  const calls = first.output.filter((o) => o.type === "function_call");
  assert.equal(calls.length, 1, JSON.stringify(first.output));
  assert.equal(calls[0].name, "get_weather");
  checkWeather(JSON.parse(calls[0].arguments));
  const stream = onRandom.openai.responses.stream({ model: "m", input: [...input, ...first.output,
    { type: "function_call_output", call_id: calls[0].call_id, output: JSON.stringify({ temperature: 21 }) }],
    tools: [fn], tool_choice: "none", reasoning: { effort: "none" }, max_output_tokens: 8 });
  let argDeltas = 0, last;
  for await (const ev of stream) {
    if (ev.type === "response.function_call_arguments.delta") argDeltas++;
    last = ev;
  }
  const final = await stream.finalResponse();
  assert.equal(argDeltas, 0);
  // max_output_tokens 8 ends it as response.incomplete (this client keeps its own snapshot then).
  assert.ok(["response.completed", "response.incomplete"].includes(last.type), last.type);
  assert.ok(final.output.some((o) => o.type === "message"), JSON.stringify(final.output));
  assert.ok(!final.output.some((o) => o.type === "function_call"));
});

await check("responses: a streamed forced call streams its arguments", async () => {
  const fn = { type: "function", name: "get_weather", parameters: weather };
  const stream = onRandom.openai.responses.stream({ model: "m", input: "Weather?", tools: [fn],
    tool_choice: { type: "function", name: "get_weather" }, reasoning: { effort: "none" }, max_output_tokens: 120 });
  let args = "";
  for await (const ev of stream) if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
  const final = await stream.finalResponse();
  const call = final.output.find((o) => o.type === "function_call");
  assert.ok(call, JSON.stringify(final.output));
  assert.equal(call.arguments, args);
  checkWeather(JSON.parse(args));
});

await check("responses: text.format json_schema output validates", async () => {
  const r = await onRandom.openai.responses.create({ model: "m", input: "Weather as JSON", reasoning: { effort: "none" }, temperature: 0,
    text: { format: { type: "json_schema", name: "weather", schema: weather, strict: true } }, max_output_tokens: 120 });
  assert.equal(r.status, "completed", JSON.stringify(r));
  checkWeather(JSON.parse(r.output_text));
});

await check("responses: unknown fields and tool types are 400s naming them", async () => {
  for (const [body, param] of [[{ input: "x", frobnicate: 1 }, "frobnicate"],
                               [{ input: "x", tools: [{ type: "web_search" }] }, "tools[0].type"],
                               [{ input: "x", previous_response_id: "resp_1" }, "previous_response_id"]]) {
    await assert.rejects(onSkills.openai.responses.create({ model: "chat-skills", ...body }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, param, e.message);
      return true;
    });
  }
});

// --- Anthropic Messages -------------------------------------------------------------------------
const messages = [{ role: "user", content: question }];
await check("messages.create: text, thinking blocks and usage", async () => {
  const m = await onSkills.anthropic.messages.create({ model: "chat-skills", max_tokens: 200, temperature: 0, messages,
    thinking: { type: "enabled", budget_tokens: 120 } });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.content[0].type, "thinking", JSON.stringify(m.content));
  const text = m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  assert.ok(text.includes("132"), text);
  assert.equal(m.stop_reason, "end_turn");
  assert.ok(m.usage.output_tokens > 0);
});

await check("messages.stream: finalMessage equals messages.create", async () => {
  const params = { model: "chat-skills", max_tokens: 200, temperature: 0, messages,
    system: [{ type: "text", text: "You are helpful." }] };
  const whole = await onSkills.anthropic.messages.create(params);
  const stream = onSkills.anthropic.messages.stream(params);
  let text = "", start = null;
  stream.on("text", (t) => { text += t; });
  stream.on("streamEvent", (e) => { if (e.type === "message_start") start = e.message; });
  const final = await stream.finalMessage();
  // message_start splits the prompt as the end does: this prompt was cached by the call before.
  assert.ok(final.usage.cache_read_input_tokens > 0, JSON.stringify(final.usage));
  for (const k of ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"])
    assert.equal(start.usage[k], final.usage[k], k + ": " + JSON.stringify(start.usage));
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(text, whole.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

await check("messages: stop_sequences report the one that matched", async () => {
  const m = await onSkills.anthropic.messages.create({ model: "chat-skills", max_tokens: 200, temperature: 0, messages,
    thinking: { type: "disabled" }, stop_sequences: ["3"] });
  assert.equal(m.stop_reason, "stop_sequence", JSON.stringify(m));
  assert.equal(m.stop_sequence, "3");
});

await check("messages: countTokens equals the prompt the reply was given", async () => {
  const count = await onSkills.anthropic.messages.countTokens({ model: "chat-skills", messages });
  const m = await onSkills.anthropic.messages.create({ model: "chat-skills", max_tokens: 1, messages });
  assert.equal(count.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
  assert.equal(m.stop_reason, "max_tokens");
});

await check("messages: a tool_use round trip, streamed", async () => {
  const tool = { name: "get_weather", description: "Forecast", input_schema: weather };
  const ask = [{ role: "user", content: "Weather in Paris for 3 days?" }];
  const stream = onRandom.anthropic.messages.stream({ model: "m", max_tokens: 120, messages: ask, tools: [tool],
    tool_choice: { type: "any", disable_parallel_tool_use: true }, thinking: { type: "disabled" } });
  const first = await stream.finalMessage();
  const uses = first.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length, 1, JSON.stringify(first.content));
  assert.equal(first.stop_reason, "tool_use");
  checkWeather(uses[0].input);
  const final = await onRandom.anthropic.messages.create({ model: "m", max_tokens: 8, tools: [tool],
    thinking: { type: "disabled" }, tool_choice: { type: "none" },
    messages: [...ask, { role: "assistant", content: first.content },
               { role: "user", content: [{ type: "tool_result", tool_use_id: uses[0].id, content: "21 C" }] }] });
  assert.ok(["end_turn", "max_tokens"].includes(final.stop_reason), final.stop_reason);
  assert.ok(!final.content.some((b) => b.type === "tool_use"));
});

await check("messages: errors in Anthropic's shape", async () => {
  await assert.rejects(onSkills.anthropic.messages.create({ model: "chat-skills", messages }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.type, "error");
    assert.equal(e.error.error.type, "invalid_request_error");
    assert.match(e.error.error.message, /max_tokens/);
    return true;
  });
});

skills.child.kill("SIGTERM");
tools.child.kill("SIGTERM");
fs.rmSync(tmp, { recursive: true, force: true });
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
