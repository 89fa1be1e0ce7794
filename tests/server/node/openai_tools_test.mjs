// The official `openai` npm client's structured-output and tool helpers against `ember serve`:
// chat.completions.parse with a strict JSON schema (message.parsed), and a tool round trip (a
// required call with parsed_arguments, the `tool` message, then the final answer). The model is a
// random-weight one with tiny-qwen3's shapes, the real Qwen3 tokenizer and Qwen3's chat template.
// Env: EMBER_BINARY, EMBER_WRITE_MODEL_FOLDER, EMBER_SHARED_DIR, EMBER_NODE_DIR. Exit 77 (skipped)
// when the packages are not installed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { nodePackage, startServer, writeRandomQwen3 } from "./ember_process.mjs";

const OpenAI = nodePackage("openai");
const shared = process.env.EMBER_SHARED_DIR;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-openai-tools-"));

const { model, added } = writeRandomQwen3(shared, process.env.EMBER_WRITE_MODEL_FOLDER, tmp);

const { child, port } = await startServer(process.env.EMBER_BINARY, model, ["--ctx", "4096"]);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const completions = client.chat.completions.parse ? client.chat.completions : client.beta.chat.completions;
// A random model is not a thinking one: <think> is banned, and one call at a time.
const common = { model: "model", max_tokens: 160, temperature: 1, seed: 5, logit_bias: { [added["<think>"]]: -100 },
                 chat_template_kwargs: { enable_thinking: false } };
const weather = { type: "object", additionalProperties: false, required: ["city", "days", "unit"],
  properties: { city: { type: "string", maxLength: 10, description: "City" },
                days: { type: "integer", minimum: 1, maximum: 7, description: "Days ahead" },
                unit: { type: "string", enum: ["celsius", "fahrenheit"], description: "Unit" } } };
function checkWeather(v) {
  assert.deepEqual(Object.keys(v).sort(), ["city", "days", "unit"]);
  assert.ok(typeof v.city === "string" && [...v.city].length <= 10, JSON.stringify(v));
  assert.ok(Number.isInteger(v.days) && v.days >= 1 && v.days <= 7, JSON.stringify(v));
  assert.ok(["celsius", "fahrenheit"].includes(v.unit), JSON.stringify(v));
}

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.stack || e}`); }
}
const user = [{ role: "user", content: "What is the weather in Paris for 3 days?" }];

await check("chat.completions.parse with a strict JSON schema", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await completions.parse({ ...common, seed, messages: user,
      response_format: { type: "json_schema", json_schema: { name: "weather", strict: true, schema: weather } } });
    assert.equal(r.choices[0].finish_reason, "stop");
    checkWeather(r.choices[0].message.parsed);
  }
});

await check("a tool round trip: required call, tool message, final answer", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Forecast", strict: true, parameters: weather } }];
  const first = await completions.parse({ ...common, messages: user, tools, tool_choice: "required", parallel_tool_calls: false });
  const msg = first.choices[0].message;
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, "get_weather");
  checkWeather(msg.tool_calls[0].function.parsed_arguments);
  const messages = [...user, { role: "assistant", content: msg.content, tool_calls: msg.tool_calls.map(
    (c) => ({ id: c.id, type: "function", function: { name: c.function.name, arguments: c.function.arguments } })) },
    { role: "tool", tool_call_id: msg.tool_calls[0].id, content: JSON.stringify({ temperature: 21 }) }];
  const final = await client.chat.completions.create({ ...common, messages, tools, tool_choice: "none", max_tokens: 8 });
  assert.equal(typeof final.choices[0].message.content, "string");
  assert.equal(final.choices[0].message.tool_calls, undefined);
  assert.ok(["stop", "length"].includes(final.choices[0].finish_reason));
});

child.kill("SIGTERM");
fs.rmSync(tmp, { recursive: true, force: true });
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
