// ui/headview.js's layout and line logic under node's test runner (joined with the base, as when registered).
import assert from "node:assert/strict";
import { test } from "node:test";

import { bytesOf, encode, load } from "./load.mjs";

const hv = await load("headview");

test("presentation rows fit the room, within 19-33 px, labels never under 14 px", () => {
  for (const T of [1, 5, 16, 40, 128, 512]) {
    for (const room of [100, 400, 600, 2000]) {
      const { row, font } = hv.fitRows(room, T);
      assert.ok(row >= 19 && row <= 33, `row ${row}`);
      assert.ok(row * T <= room || row === 19, `T ${T} in ${room} px: rows of ${row} px`);
      assert.ok(font >= hv.MIN_LABEL_PX && font <= 22 && font <= row, `font ${font} in a row of ${row}`);
    }
  }
  assert.deepEqual(hv.fitRows(16 * 25, 16), { row: 25, font: 17 });
});

test("long inputs get tighter rows", () => {
  assert.deepEqual([16, 64, 65, 128, 129, 512].map(hv.rowHeight), ["1.5em", "1.5em", "1.3em", "1.3em", "1.1em", "1.1em"]);
});

test("the slide frame holds the title, both token columns and the lines", () => {
  const f = hv.slideFrame(18, 1000, 10, (font) => font * 5);
  assert.equal(f.row, 22); // rows at least 22 px
  assert.equal(f.font, 14);
  assert.equal(f.linesW, 640); // at most 640 px of lines
  assert.equal(f.colW, 14 * 5 + 16);
  assert.equal(f.W, 2 * f.colW + f.linesW);
  assert.ok(f.y(0) - f.row / 2 >= f.top && f.y(9) + f.row / 2 <= f.H, "every row inside the picture");
  assert.equal(hv.slideFrame(30, 100, 3, () => 1000).colW, 320); // long tokens: columns capped
  assert.equal(hv.slideFrame(30, 100, 3, () => 0).linesW, 320);
});

test("heads shown and named by mode", () => {
  const several = new Set([5, 0, 3]);
  assert.deepEqual(hv.shownHeads("avg", 2, several), []);
  assert.deepEqual(hv.shownHeads("one", 2, several), [2]);
  assert.deepEqual(hv.shownHeads("several", 2, several), [0, 3, 5]);
  assert.equal(hv.headsText("several", 2, several, "avg"), "heads 0, 3, 5");
  assert.equal(hv.headsText("avg", 2, several, "average of 12 heads"), "average of 12 heads");
  assert.equal(hv.shortLabel("x".repeat(30)), `${"x".repeat(23)}…`);
});

test("several heads read from the app's choice: this model's heads, once each, ascending", () => {
  assert.deepEqual(hv.headList("7,1,4", 12), [1, 4, 7]);
  assert.deepEqual(hv.headList(" 2, x,99,\u0663,,2,12,11,-1,1e1,0003,00004", 12), [2, 3, 11]);
  assert.deepEqual(hv.headList("", 12), []);
  assert.deepEqual(hv.headList(undefined, 12), []);
});

// 2 layers x 2 heads x 3 tokens, weights in steps of 1/65535.
function layers() {
  const w = Uint16Array.from({ length: 2 * 2 * 3 * 3 }, (_, i) => (i % 3 === 0 ? 65535 : 0));
  const held = new hv.Layers();
  held.take(hv.decode(encode({ id: "a", L: 2, H: 2, T: 3, layers: [0, 1], bits: 16, zipped: null }, bytesOf(w))));
  return held;
}

test("series: one per head shown, coloured by head; the average in its own colour", () => {
  const held = layers();
  const one = hv.series(held, 1, "one", 1, new Set([1]));
  assert.deepEqual(one.map((s) => s.head), [1]);
  assert.equal(one[0].plane.offset, 9);
  const several = hv.series(held, 0, "several", 0, new Set([1, 0]));
  assert.deepEqual(several.map((s) => s.head), [0, 1]);
  assert.notEqual(several[0].colour, several[1].colour);
  assert.deepEqual(hv.series(held, 0, "avg", 0, new Set()).map((s) => s.head), ["avg"]);
  assert.deepEqual(hv.series(held, 5, "one", 0, new Set([0])), [], "a layer not held draws nothing");
});

test("eachLine: every line above the threshold, or one token's lines whatever their weight", () => {
  const plane = { data: Float32Array.of(0.5, 0.3, 0.2, 0.01, 0.9, 0.09, 0, 0, 1), offset: 0, scale: 1 };
  const lines = (focus, minW) => {
    const out = [];
    hv.eachLine(plane, 3, focus, minW, (q, k, w) => out.push([q, k, w]));
    return out;
  };
  assert.deepEqual(lines(null, 0.05).map(([q, k]) => `${q}${k}`), ["00", "01", "02", "11", "12", "22"]);
  assert.deepEqual(lines({ side: "q", i: 1 }, 0).map(([, k]) => k), [0, 1, 2], "a query's line to every key");
  assert.deepEqual(lines({ side: "k", i: 0 }, 0).map(([q, , w]) => [q, +w.toFixed(2)]), [[0, 0.5], [1, 0.01], [2, 0]]);
});

test("a measure's lines: fractions of the layer's largest value, one series for a measure without heads", () => {
  // 1 layer x 1 map (no heads) x 2 tokens, top value 4 (a length, not a weight): steps of 4/65535.
  const w = Uint16Array.of(65535, 0, 16384, 49151);
  const held = new hv.Layers();
  held.take(hv.decode(encode({ id: "m", L: 1, H: 1, T: 2, layers: [0], bits: 16, zipped: null, top: [4] }, bytesOf(w))));
  const [only] = hv.series(held, 0, "one", 7, new Set([7]), false);
  assert.equal(only.head, "layer");
  assert.equal(hv.valueAt(only.plane, 0), 1, "the largest value is a fully opaque line");
  assert.ok(Math.abs(hv.valueAt(only.plane, 2) * held.tops[0] - 16384 * 4 / 65535) < 1e-6, "times top: the value");
  assert.ok(Math.abs(held.halfStep(0) - 2 / 65535) < 1e-12);
  assert.equal(hv.headsText("one", 7, new Set([7]), "avg", false), "the whole layer");
  assert.equal(hv.headsText("one", 7, new Set([7]), "avg"), "head 7");
  // attention (top 1) keeps its weights as they are
  const att = layers();
  assert.equal(hv.valueAt(hv.series(att, 0, "one", 0, new Set([0]))[0].plane, 0), 1);
  assert.equal(hv.RAW_LINES.perHead, true);
});

test("overview bands: gaps and merges of [top, bottom) ranges", () => {
  assert.deepEqual(hv.gaps([], 0, 10), [[0, 10]]);
  assert.deepEqual(hv.gaps([[2, 4], [6, 7]], 0, 10), [[0, 2], [4, 6], [7, 10]]);
  assert.deepEqual(hv.gaps([[2, 4], [6, 7]], 3, 6.5), [[4, 6]]);
  assert.deepEqual(hv.gaps([[0, 10]], 0, 10), []);
  assert.deepEqual(hv.addBand([[0, 2], [5, 6]], [2, 5]), [[0, 6]], "bands that touch merge");
  assert.deepEqual(hv.addBand([[5, 6]], [0, 1]), [[0, 1], [5, 6]]);
  assert.ok(hv.crosses(10, 500, [100, 200], 1), "a line across the band");
  assert.ok(hv.crosses(250, 200.5, [100, 200], 1), "its stroke's edge reaches in");
  assert.ok(!hv.crosses(10, 20, [30, 40], 2) && !hv.crosses(300, 204, [100, 200], 1), "wholly above or below");
  // scrolled into rows not inked yet: the band starts at the screen's middle, on a device pixel's edge
  assert.deepEqual(hv.nextBand([[0, 100]], 1000, 500.3, 200, 1), [500, 700]);
  assert.deepEqual(hv.nextBand([[0, 100]], 1000, 500.3, 200, 2), [500, 700]);
  assert.deepEqual(hv.nextBand([[0, 100]], 1000, 500.9, 200, 2), [500.5, 700.5]);
  assert.deepEqual(hv.nextBand([[0, 100]], 1000, 950, 200, 1), [800, 1000], "near the bottom: the last 200 px");
  assert.deepEqual(hv.nextBand([[0, 1000]], 1000, 500, 200, 1), null, "whole");
});

test("overview bands: the rows on screen first, then every row once, half a screen a step, on device pixels", () => {
  for (const dpr of [1, 1.25, 2]) {
    for (const [rows, midTop, screen] of [[2460, 300.37, 1000], [2460, -1700.6, 800], [9000, 5000.2, 900],
      [300, 200, 1000], [2460.4, 1333.3, 777]]) {
      const full = Math.round(rows * dpr) / dpr; // the canvas's height: whole device pixels
      const seen = [hv.snapDown(Math.max(0, -midTop), dpr), hv.snapUp(Math.min(full, screen - midTop), dpr)];
      let done = [];
      const drawn = [];
      for (const band of seen[0] < seen[1] ? hv.gaps(done, ...seen) : []) {
        drawn.push(band);
        done = hv.addBand(done, band);
      }
      const step = hv.snapUp(screen / 2, dpr);
      for (let band; (band = hv.nextBand(done, full, screen / 2 - midTop, step, dpr)); ) {
        assert.ok(band[1] - band[0] <= step + 1e-9 && band[1] > band[0], `${band} of at most ${step} px`);
        assert.deepEqual(hv.gaps(done, ...band), [band], `${band} overlaps what is inked: ${JSON.stringify(done)}`);
        drawn.push(band);
        done = hv.addBand(done, band);
        assert.ok(drawn.length < 100);
      }
      assert.deepEqual(done, [[0, full]], "every row inked");
      const length = drawn.reduce((s, [a, b]) => s + b - a, 0);
      assert.ok(Math.abs(length - full) < 1e-6, "no row twice");
      for (const v of drawn.flat()) assert.ok(Math.abs(v * dpr - Math.round(v * dpr)) < 1e-6, `${v} at ${dpr}x`);
      if (seen[0] < seen[1]) assert.deepEqual(drawn[0], seen, "the screen's rows first");
      // idle time then goes on from the screen outwards: each next band touches what is already inked
      for (let i = 1; i < drawn.length; i++) {
        const before = drawn.slice(0, i).reduce((d, b) => hv.addBand(d, b), []);
        const [a, b] = drawn[i];
        if (seen[0] < seen[1]) assert.ok(before.some(([x, y]) => y === a || x === b), `${drawn[i]} next to ${before}`);
      }
    }
  }
});
