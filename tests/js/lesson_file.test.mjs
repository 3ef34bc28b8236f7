// ui/lesson_file.js under node's test runner: what the browser sends for a picked lesson file. Reading a real file
// through the page is tested in Chromium (tests/app/test_player_browser.py).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import { load } from "./load.mjs";

const lf = await load("lesson_file");

test("base64 of any bytes is Node's, also past one slice of String.fromCharCode", () => {
  for (const n of [0, 1, 2, 3, 0x8000 - 1, 0x8000, 0x8000 + 1, 200_000]) {
    const bytes = new Uint8Array(randomBytes(n));
    assert.equal(lf.base64(bytes), Buffer.from(bytes).toString("base64"), `${n} bytes`);
  }
});

test("a file up to the cap is sent whole; a larger one is not read, only named", async () => {
  let reads = 0;
  const file = (size) => ({ name: "week 3 <b>.json", size, arrayBuffer: async () => ((reads += 1), randomBytes(size)) });
  const small = await lf.message(file(lf.MAX_BYTES), 7);
  assert.deepEqual(Object.keys(small).sort(), ["data", "n", "name", "size"]);
  assert.equal(Buffer.from(small.data, "base64").length, lf.MAX_BYTES);
  assert.equal(small.name, "week 3 <b>.json");
  assert.equal(small.n, 7);
  assert.equal(reads, 1);
  const big = await lf.message(file(lf.MAX_BYTES + 1), 8);
  assert.deepEqual(big, { name: "week 3 <b>.json", size: lf.MAX_BYTES + 1, n: 8, refused: "too large" });
  assert.equal(reads, 1, "a file over the cap is never read");
  const long = await lf.message({ name: "x".repeat(5000), size: 2, arrayBuffer: async () => new ArrayBuffer(2) }, 1);
  assert.equal(long.name.length, 200, "a name is cut before it travels");
});

test("the cap is the lesson file's cap in ui/lessons/format.py", async () => {
  const { readFileSync } = await import("node:fs");
  const py = readFileSync(new URL("../../ui/lessons/format.py", import.meta.url), "utf8");
  const cap = Number(py.match(/^MAX_BYTES = ([\d_]+)/m)[1].replaceAll("_", ""));
  assert.equal(lf.MAX_BYTES, cap);
});
