// ui/panels.js's logic under node's test runner (joined with the base, as when registered): the payload, the
// numbers as the figures print them, hover read-outs, ticks, and where the panels and their cells lie.
import assert from "node:assert/strict";
import { test } from "node:test";

import { bytesOf, load } from "./load.mjs";

const pn = await load("panels");

// ui/panels.py's layout: [uint32 n][header][zeros to 8][each panel's values from header.panels[i].at]
function encodePanels(header, arrays) {
  const bodies = [];
  let at = 0;
  header.panels.forEach((p, i) => {
    p.at = at;
    const bytes = bytesOf(arrays[i]);
    const padded = new Uint8Array(Math.ceil(bytes.length / 8) * 8);
    padded.set(bytes);
    bodies.push(padded);
    at += padded.length;
  });
  const head = new TextEncoder().encode(JSON.stringify(header));
  const start = Math.ceil((4 + head.length) / 8) * 8;
  const out = new Uint8Array(start + at);
  new DataView(out.buffer).setUint32(0, head.length, true);
  out.set(head, 4);
  let n = start;
  for (const b of bodies) (out.set(b, n), (n += b.length));
  return out;
}

const panel = (over) => ({ x: [0.1, 0.5], y: [0, 0.8], rows: ["a (0)", "b (1)"], shape: [2, 3], dtype: "f4", zmin: -1,
  zmax: 1, scale: [[0, 0, 0, 255], [1, 255, 0, 0]], hover: "v of %{y}, dim %{x}: %{z:.4f}", text: "", textSize: 13,
  ticks: true, xticks: false, xtitle: "", ...over });

test("each panel's values come back as the type they travelled in, NaN included", () => {
  const header = { panels: [panel({}), panel({ dtype: "f8", shape: [2, 1] })] };
  const f4 = Float32Array.from([0.5, -0.25, 1, 0, NaN, 3]);
  const f8 = Float64Array.from([0.1234567890123, -2]);
  const { values } = pn.decodePanels(encodePanels(header, [f4, f8]));
  assert.ok(values[0] instanceof Float32Array && values[1] instanceof Float64Array);
  assert.deepEqual([...values[0]], [...f4]);
  assert.deepEqual([...values[1]], [...f8]);
});

test("numbers print as d3's fixed formats do, and a hover template is filled in", () => {
  assert.equal(pn.formatted(31.2294, ".2f"), "31.23");
  assert.equal(pn.formatted(-0.0004, ".3f"), "-0.000");
  assert.equal(pn.formatted(0.5, ""), "0.5");
  assert.equal(pn.filled("k of %{y}, dim %{x}: %{z:.4f}", 7, "<b> (3)", 0.123456), "k of <b> (3), dim 7: 0.1235");
  assert.equal(pn.filled("“it” → %{y}: %{z:.6f}", 0, "the (1)", 1 / 3), "“it” → the (1): 0.333333");
});

test("ticks are round steps inside the range", () => {
  assert.deepEqual(pn.niceTicks(0, 383, 5), [0, 100, 200, 300]);
  assert.deepEqual(pn.niceTicks(-4.7, 4.7, 5), [-4, -2, 0, 2, 4]);
  assert.deepEqual(pn.niceTicks(-0.09, 0.09, 4), [-0.05, 0, 0.05]);
  assert.deepEqual(pn.niceTicks(1, 1, 5), [1]);
});

test("text on a dark cell is white, on a light one dark", () => {
  assert.equal(pn.inkOn([8, 48, 107]), "#fff");
  assert.equal(pn.inkOn([247, 251, 255]), "#212529");
});

test("the plot makes room for the row labels and the colour bars, and a point finds its cell", () => {
  const measure = (text, px) => text.length * px * 0.6;
  const header = { margin: { l: 10, r: 10, t: 100, b: 30 }, size: 15, height: 400,
    panels: [panel({ rows: ["a very long token (0)", "b (1)"] }), panel({ x: [0.6, 0.93], ticks: false, bar: {
      thickness: 14, len: 0.5, y: 0.5, title: "v" } })] };
  const plot = pn.layoutPanels(header, 800, measure);
  const labels = measure("a very long token (0)", 15);
  assert.ok(plot.boxes[0].left >= 10 + labels, "the row labels fit left of the first panel");
  const barRight = plot.x0 + plot.w * 1.02 + 14 + 6 + measure("-1", 15);
  assert.ok(barRight <= 800 - 10, "the colour bar and its numbers fit on the right");
  assert.equal(plot.y0, 100);
  assert.equal(plot.h, 400 - 100 - 30);
  const b = plot.boxes[0];
  const w = (b.right - b.left) / 3;
  const h = (b.bottom - b.top) / 2;
  assert.deepEqual(pn.cellAt(b, [2, 3], b.left + 2.5 * w, b.top + 1.5 * h), { row: 1, col: 2 });
  assert.deepEqual(pn.cellAt(b, [2, 3], b.left + 0.1, b.top + 0.1), { row: 0, col: 0 });
  assert.equal(pn.cellAt(b, [2, 3], b.left - 1, b.top + 1), null);
  assert.equal(pn.cellAt(b, [2, 3], b.right, b.top + 1), null);
});

test("a payload is the same only byte for byte", () => {
  const a = Uint8Array.from([1, 2, 3, 4]);
  assert.equal(pn.sameBytes(null, a), false);
  assert.equal(pn.sameBytes(a, Uint8Array.from([1, 2, 3, 4])), true);
  assert.equal(pn.sameBytes(a, Uint8Array.from([1, 2, 3, 5])), false);
  assert.equal(pn.sameBytes(a, Uint8Array.from([1, 2, 3])), false);
});

test("a panel sent as a product is each row of the grid times the column's entry, in float64", () => {
  const column = Float64Array.from([0.1, 1 / 3]);
  const grid = Float32Array.from([1.5, -2, 0.7, 3]);
  const out = pn.rowScaled(column, grid, [2, 2]);
  assert.ok(out instanceof Float64Array);
  assert.deepEqual([...out], [0.1 * 1.5, 0.1 * -2, (1 / 3) * Math.fround(0.7), (1 / 3) * 3]);
});
