// `ember serve` of every embedding golden's model driven by the official `openai` npm package:
// embeddings.create (the client asks for base64 and decodes it) and encoding_format "float" give
// every case within the golden's tolerance, one input per request and all in one; `dimensions` it
// cannot give is a 400 naming it; a causal LM folder's /v1/embeddings is a 400 naming what it lacks.
// Env: EMBER_BINARY, EMBER_SHARED_DIR, EMBER_NODE_DIR. Exit 77 (skipped) when the packages are not installed.
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { nodePackage, startServer } from "./ember_process.mjs";

const OpenAI = nodePackage("openai");
const ember = process.env.EMBER_BINARY;
const shared = process.env.EMBER_SHARED_DIR;
const goldenDir = path.join(shared, "testdata", "embeddings");
const goldens = fs.readdirSync(goldenDir).filter((f) => f.endsWith(".json")).sort()
  .map((f) => ({ file: f, ...JSON.parse(fs.readFileSync(path.join(goldenDir, f), "utf8")) }));

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) { failures++; console.log(`FAIL ${name}: ${e.message}`); }
}

function expectMatches(golden, c, v, how) {
  const want = c.embedding;
  assert.equal(v.length, want.length, `${c.name} ${how}: width`);
  let ab = 0, aa = 0, bb = 0, diff = 0;
  for (let i = 0; i < want.length; i++) {
    ab += v[i] * want[i]; aa += v[i] * v[i]; bb += want[i] * want[i];
    diff = Math.max(diff, Math.abs(v[i] - want[i]));
  }
  const cos = ab / Math.sqrt(aa * bb);
  assert.ok(cos >= golden.tolerance.cosine_min, `${c.name} ${how}: cosine ${cos}`);
  assert.ok(diff <= golden.tolerance.max_abs_diff, `${c.name} ${how}: max abs diff ${diff}`);
}

async function withServer(model, fn) {
  // The served KV type is f16 (the default): embeddings keep float32 keys and values for their pass.
  const { child, port } = await startServer(ember, model, ["--parallel", "2", "--ctx", "512"]);
  const exited = new Promise((resolve) => child.on("exit", resolve));
  try {
    await fn(new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 }));
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

for (const g of goldens) {
  await withServer(path.join(shared, "models", g.model), async (client) => {
    await check(`${g.file}: each case, base64 (the client's default)`, async () => {
      for (const c of g.cases) {
        const r = await client.embeddings.create({ model: g.model, input: c.input });
        assert.equal(r.data.length, 1);
        expectMatches(g, c, r.data[0].embedding, "alone");
        assert.equal(r.usage.prompt_tokens, c.n_tokens);
      }
    });
    await check(`${g.file}: all cases in one request, float and token ids`, async () => {
      const texts = await client.embeddings.create({ model: g.model, input: g.cases.map((c) => c.input),
                                                     encoding_format: "float" });
      const ids = await client.embeddings.create({ model: g.model, input: g.cases.map((c) => c.ids) });
      for (const [i, c] of g.cases.entries()) {
        assert.equal(texts.data[i].index, i);
        expectMatches(g, c, texts.data[i].embedding, "batched");
        expectMatches(g, c, ids.data[i].embedding, "batched ids");
      }
    });
    await check(`${g.file}: dimensions it cannot give is a 400 naming it`, async () => {
      await assert.rejects(client.embeddings.create({ model: g.model, input: "a", dimensions: 8 }),
                           (e) => e.status === 400 && e.param === "dimensions");
    });
  });
}

await withServer(path.join(shared, "models", "tiny-llama-f32"), async (client) => {
  await check("causal LM folder: a 400 naming modules.json", async () => {
    await assert.rejects(client.embeddings.create({ model: "tiny-llama-f32", input: "a" }),
                         (e) => e.status === 400 && /modules\.json/.test(e.message));
  });
});

process.exit(failures ? 1 : 0);
