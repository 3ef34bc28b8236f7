// ui/copy_link.js under node's test runner: which way the link was copied. The box and its button are tested in
// Chromium (tests/app/test_player_browser.py, and the walks press Copy link).
import assert from "node:assert/strict";
import { test } from "node:test";

import { load } from "./load.mjs";

const cl = await load("copy_link");

test("the clipboard first; where it refuses or is missing, the fallback decides", async () => {
  const written = [];
  const ok = { writeText: async (t) => written.push(t) };
  const refusing = { writeText: async () => { throw new Error("NotAllowedError"); } };
  let fallbacks = 0;
  const copies = () => ((fallbacks += 1), true);
  const selects = () => ((fallbacks += 1), false);
  assert.equal(await cl.copyText("https://x/lessons?lesson=~a", ok, copies), "copied");
  assert.deepEqual(written, ["https://x/lessons?lesson=~a"]);
  assert.equal(fallbacks, 0, "no fallback once the clipboard took it");
  assert.equal(await cl.copyText("a", refusing, copies), "copied");
  assert.equal(await cl.copyText("a", refusing, selects), "selected");
  assert.equal(await cl.copyText("a", undefined, selects), "selected");
  assert.equal(await cl.copyText("a", {}, copies), "copied");
  assert.equal(fallbacks, 4);
});

test("each outcome has its sentence", () => {
  assert.deepEqual(Object.keys(cl.SAID).sort(), ["copied", "selected"]);
  for (const sentence of Object.values(cl.SAID)) assert.match(sentence, /^[A-Z].*\.$/);
});
