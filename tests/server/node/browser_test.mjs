// The web chat page of `ember serve` in Debian's chromium, driven by playwright-core: a message that
// makes chat-skills think streams in (the text grows over several renders), the thinking section
// shows the reasoning and folds, the reply equals the one-shot CLI's greedy answer, and the stop
// button ends a reply early. Saves screenshots and prints their paths.
// Env: EMBER_BINARY, EMBER_SHARED_DIR, EMBER_NODE_DIR (setup.sh's packages), EMBER_CHROMIUM,
// EMBER_ARTIFACT_DIR (where screenshots go). Exit 77 (skipped) only when chromium is not installed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { browserForTests, startServer, cliChat as runCliChat } from "./ember_process.mjs";

const { chromium, chromiumPath } = browserForTests();

const ember = process.env.EMBER_BINARY;
const model = path.join(process.env.EMBER_SHARED_DIR, "models", "chat-skills");
const artifacts = process.env.EMBER_ARTIFACT_DIR || process.cwd();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ember-browser-"));

// Single-message conversations with thinking on: one that streams to the end, and the one with the
// longest expected reply for the stop button.
const cases = fs.readFileSync(path.join(process.env.EMBER_SHARED_DIR, "testdata/chat_skills/eval.jsonl"), "utf8")
  .split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l))
  .filter((c) => c.enable_thinking && c.messages.length === 1 && c.messages[0].role === "user");
assert.ok(cases.length >= 2, "eval.jsonl has single-message thinking cases");
const streamCase = cases[0];
const stopCase = cases.reduce((a, b) => (b.expected.length > a.expected.length ? b : a));

function cliChat(messages) {
  return runCliChat(ember, model, path.join(tmp, "messages.json"), messages, ["--think"]);
}

const { child, port } = await startServer(ember, model);
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
// Without the background-networking flags chromium tries to reach Google's services, which the
// closed network refuses.
const context = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
  executablePath: chromiumPath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1100, height: 720 },
});
const page = context.pages()[0] || (await context.newPage());
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
// A slow link, so that the reply arrives in many pieces however fast the model is.
const cdp = await context.newCDPSession(page);
await cdp.send("Network.enable");
const throttle = (bytesPerSecond) => cdp.send("Network.emulateNetworkConditions",
  { offline: false, latency: 0, downloadThroughput: bytesPerSecond, uploadThroughput: -1 });

// About 1.5 KB/s: a reply's events take several seconds to arrive, so a renderer that a loaded
// machine starves for a moment still sees them in several reads, and a click on stop lands while the
// reply streams (at 3 KB/s a full ctest -j2 on a 2-core machine once delivered a whole reply in one read).
const slowLink = 1500;

let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok   ${name}`); } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
    // What the page showed then: the status line and the last reply's text and note.
    const shown = await page.evaluate(() => {
      const msgs = document.querySelectorAll(".msg.assistant"), last = msgs[msgs.length - 1];
      return { status: document.getElementById("status").textContent, reply: last ? last.textContent.slice(-300) : null,
               growth: (window.__growth || []).length };
    }).catch((err) => String(err));
    console.log(`     page: ${JSON.stringify(shown)}`);
  }
}

// Records the last assistant message's text lengths on every change of the message list.
async function watchGrowth() {
  await page.evaluate(() => {
    window.__growth = [];
    const box = document.getElementById("messages");
    new MutationObserver(() => {
      const msgs = box.querySelectorAll(".msg.assistant");
      const last = msgs[msgs.length - 1];
      if (!last) return;
      const thinking = last.querySelector(".thinking-body");
      const section = last.querySelector("details.thinking");
      window.__growth.push({ content: last.querySelector(".content").textContent.length,
                             reasoning: thinking ? thinking.textContent.length : 0,
                             open: section ? section.open : false });
    }).observe(box, { childList: true, subtree: true, characterData: true, attributes: true });
  });
}

const stored = () => page.evaluate(() => JSON.parse(localStorage.getItem("ember.chats")));
const send = async (text) => { await page.fill("#input", text); await page.press("#input", "Enter"); };

await check("page loads and names the model", async () => {
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("chat-skills"));
  assert.ok(await page.isChecked("#thinking"), "thinking is on by default");
});

const expected = cliChat(streamCase.messages);
const screenshot = path.join(artifacts, "web_chat.png");
await check("a thinking reply streams in and equals the CLI's", async () => {
  // A renderer starved for the whole reply sees it in one piece: then again, in a new chat, on a
  // slower link (a page that does not render as the reply streams fails every time).
  let growth, totals;
  for (const link of [slowLink, slowLink / 4, slowLink / 16]) {
    if (totals) await page.click("#new-chat");
    await watchGrowth();
    await throttle(link);
    await page.evaluate(() => { document.getElementById("status").textContent = ""; });
    await send(streamCase.messages[0].content);
    await page.waitForSelector("#stop:not([hidden])");
    await page.waitForFunction(() => document.getElementById("status").textContent.includes("tokens in"), null,
                               { timeout: 120000 });
    growth = await page.evaluate(() => window.__growth);
    totals = [...new Set(growth.map((g) => g.content + g.reasoning))];
    console.log(`     at ${link} bytes/s the reply grew over ${totals.length} renders`);
    if (totals.length >= 3) break;
  }
  // At least one render between the empty reply and the whole one (a starved renderer draws few).
  assert.ok(totals.length >= 3, `the reply grew over ${totals.length} renders: ${JSON.stringify(totals)}`);
  for (let i = 1; i < totals.length; i++) assert.ok(totals[i] > totals[i - 1], "the reply only grows");
  assert.ok(growth.some((g) => g.reasoning > 0 && g.content === 0), "the reasoning arrives before the answer");
  // While the reasoning streams, the thinking section is open (seen by the observer, which a starved
  // renderer's polling could miss while the section is open only for a moment).
  assert.ok(growth.some((g) => g.reasoning > 0 && g.content === 0 && g.open), "the thinking section is open while it streams");
  const chats = await stored();
  const reply = chats[0].messages[1];
  assert.equal(reply.content, expected.content);
  assert.equal(reply.reasoning_content, expected.reasoning_content);
  assert.ok(expected.reasoning_content.length > 0, "the model thought");
  assert.equal((await page.textContent(".msg.assistant .content")).trim(), expected.content.trim());
  assert.ok(await page.isHidden("#stop"), "the stop button hides when the reply is done");
});

await check("the thinking section folds and unfolds", async () => {
  const details = page.locator(".msg.assistant details.thinking");
  assert.equal(await details.getAttribute("open"), null, "folded once the reply is done");
  assert.equal((await details.locator("summary").textContent()).trim(), "Thought");
  await details.locator("summary").click();
  assert.notEqual(await details.getAttribute("open"), null);
  assert.equal((await details.locator(".thinking-body").textContent()).trim(), expected.reasoning_content.trim());
  await page.screenshot({ path: screenshot });
  console.log(`screenshot: ${screenshot}`);
});

await check("stop ends a streaming reply early", async () => {
  const full = cliChat(stopCase.messages);
  // Slower still: only the reply's first events are needed, and the click must land before the last.
  // A machine too loaded to click before the reply ends gets another try on a slower link.
  for (const link of [slowLink / 5, slowLink / 10]) {
    await throttle(link);
    await page.click("#new-chat");
    await watchGrowth();
    await page.evaluate(() => { document.getElementById("status").textContent = ""; });
    await send(stopCase.messages[0].content);
    await page.waitForFunction(() => window.__growth.some((g) => g.reasoning > 0), null, { timeout: 60000 });
    // Clicked in the page, where seeing the button and pressing it are one step: playwright's click
    // waits for animation frames, which a starved renderer draws seconds apart.
    const clicked = await page.evaluate(() => {
      const stop = document.getElementById("stop");
      if (stop.hidden) return false;
      stop.click();
      return true;
    });
    if (clicked) break;
    const status = await page.textContent("#status");
    assert.ok(status.includes("tokens in") && link !== slowLink / 10, `stop was hidden while the reply streamed (${status})`);
    console.log(`     at ${link} bytes/s the reply ended before the click (${status}): again, slower`);
  }
  await page.waitForSelector("#stop", { state: "hidden" });
  assert.equal(await page.textContent("#status"), "stopped");
  assert.ok(await page.isEnabled("#send"), "send is enabled again");
  const reply = (await stored())[0].messages[1];
  const got = reply.reasoning_content + reply.content;
  assert.ok(got.length > 0 && got.length < full.reasoning_content.length + full.content.length,
            `stopped part-way (${got.length} characters)`);
  assert.ok(full.reasoning_content.startsWith(reply.reasoning_content), "what arrived is a prefix of the full reply");
  assert.ok(reply.stopped, "the reply is marked as stopped");
  assert.equal((await page.textContent(".msg.assistant .note")).trim(), "Stopped.");
  await page.screenshot({ path: path.join(artifacts, "web_chat_stopped.png") });
});

await check("the server is idle and healthy afterwards", async () => {
  await throttle(-1);
  for (let i = 0; i < 100; i++) {
    const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    if (/\nember_running_sequences 0\n/.test(m)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  assert.match(m, /\nember_running_sequences 0\n/);
  assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
});

await check("no errors in the page", async () => assert.deepEqual(pageErrors, []));

await context.close();
child.kill("SIGTERM");
await exited;
fs.rmSync(tmp, { recursive: true, force: true });
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
