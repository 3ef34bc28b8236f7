// ui/heatmap.js's colours and layout under node's test runner (joined with the base, as when registered).
import assert from "node:assert/strict";
import { test } from "node:test";

import { load } from "./load.mjs";

const hm = await load("heatmap");
const BLUES = [[0, 247, 251, 255], [0.5, 107, 174, 214], [1, 8, 48, 107]];

test("the palette runs through the stops, linear in RGB between them", () => {
  const lut = hm.palette(BLUES);
  const n = lut.length / 3;
  assert.deepEqual([...lut.slice(0, 3)], [247, 251, 255]);
  assert.deepEqual([...lut.slice(-3)], [8, 48, 107]);
  const mid = Math.round(0.25 * (n - 1)) * 3; // halfway between the first two stops
  assert.deepEqual([...lut.slice(mid, mid + 3)].map((c, i) => Math.abs(c - (BLUES[0][i + 1] + BLUES[1][i + 1]) / 2) <= 1),
    [true, true, true]);
});

test("paint: fixed scale tops at 1, auto at the map's largest value, per row at each row's", () => {
  const lut = hm.palette(BLUES);
  const plane = { data: Float32Array.of(0.1, 0.4, 0.2, 0.05), offset: 0, scale: 1 };
  const px = new Uint8ClampedArray(2 * 2 * 4);
  const darkest = (x) => px[x * 4] === 8 && px[x * 4 + 1] === 48 && px[x * 4 + 2] === 107;
  assert.equal(hm.paint(px, plane, 2, "fixed", lut), 1);
  assert.ok(![0, 1, 2, 3].some(darkest));
  assert.equal(hm.paint(px, plane, 2, "auto", lut), Math.fround(0.4));
  assert.deepEqual([0, 1, 2, 3].map(darkest), [false, true, false, false]);
  hm.paint(px, plane, 2, "row", lut);
  assert.deepEqual([0, 1, 2, 3].map(darkest), [false, true, true, false]);
  assert.ok([3, 7, 11, 15].every((a) => px[a] === 255), "opaque");
  assert.equal(hm.scaleTop({ data: new Float32Array(4), offset: 0, scale: 1 }, 2, "auto"), 1, "an all-zero map");
});

test("labels on every step-th token are at least 1.5 em apart; the map fits its room", () => {
  for (const T of [129, 300, 512]) {
    for (const [width, room] of [[1280, null], [1280, 560], [420, null], [2000, null]]) {
      const font = room === null ? 12 : 14;
      const f = hm.mapFrame({ widest: 80, font, width, room, T });
      assert.ok((f.side / T) * f.step >= font * 1.5, `T ${T}: every ${f.step}th label in ${f.side} px`);
      assert.ok(f.side >= 160 && f.side <= 640);
      if (room !== null) assert.ok(f.side + f.bottom <= room || f.side === 160, "whole on the projector");
    }
  }
});
