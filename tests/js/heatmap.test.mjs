// ui/heatmap.js's logic under node's test runner (joined with the base, as when registered): the payload's parts,
// exact decimals, colours, the shared colour scale, labels and sizes, block means, file names and the note.
import assert from "node:assert/strict";
import { test } from "node:test";
import { deflateSync } from "node:zlib";

import { bytesOf, encode, load } from "./load.mjs";

const hm = await load("heatmap");
const BLUES = [[0, 247, 251, 255], [0.5, 107, 174, 214], [1, 8, 48, 107]];
const plane = (...v) => ({ data: Float32Array.from(v), offset: 0, scale: 1 });

test("the palette runs through the stops, linear in RGB between them", () => {
  const lut = hm.palette(BLUES);
  const n = lut.length / 3;
  assert.deepEqual([...lut.slice(0, 3)], [247, 251, 255]);
  assert.deepEqual([...lut.slice(-3)], [8, 48, 107]);
  const mid = Math.round(0.25 * (n - 1)) * 3; // halfway between the first two stops
  assert.deepEqual([...lut.slice(mid, mid + 3)].map((c, i) => Math.abs(c - (BLUES[0][i + 1] + BLUES[1][i + 1]) / 2) <= 1),
    [true, true, true]);
});

test("paint: colours on 0..top, per row on 0..each row's maximum, rows not computed in grey", () => {
  const lut = hm.palette(BLUES);
  const p = plane(0.1, 0.4, 0.2, 0.05);
  const px = new Uint8ClampedArray(2 * 2 * 4);
  const darkest = (x) => px[x * 4] === 8 && px[x * 4 + 1] === 48 && px[x * 4 + 2] === 107;
  hm.paint(px, p, 2, { scale: "fixed", top: 1, lut });
  assert.ok(![0, 1, 2, 3].some(darkest));
  hm.paint(px, p, 2, { scale: "auto", top: hm.sharedTop([{ plane: p, K: 2, rows: null }], "auto", 1), lut });
  assert.deepEqual([0, 1, 2, 3].map(darkest), [false, true, false, false]);
  hm.paint(px, p, 2, { scale: "row", top: 1, lut });
  assert.deepEqual([0, 1, 2, 3].map(darkest), [false, true, true, false]);
  assert.ok([3, 7, 11, 15].every((a) => px[a] === 255), "opaque");
  hm.paint(px, p, 2, { scale: "fixed", top: 1, lut, rows: [1] });
  assert.deepEqual([...px.slice(0, 4)], [233, 236, 239, 255], "row 0 was not computed");
  assert.notDeepEqual([...px.slice(8, 12)], [233, 236, 239, 255]);
});

test("one colour scale for maps shown together: fixed, the largest value of all, or 1 per row", () => {
  const raw = { plane: plane(0.9, 0.1, 0.5, 0.5), K: 2, rows: null };
  const measure = { plane: plane(0.2, 0.3, 0.05, 0.1), K: 2, rows: null };
  assert.equal(hm.sharedTop([raw, measure], "fixed", 1), 1);
  assert.equal(hm.sharedTop([raw, measure], "auto", 1), Math.fround(0.9));
  assert.equal(hm.sharedTop([measure], "auto", 1), Math.fround(0.3));
  assert.equal(hm.sharedTop([measure], "row", 1), 1);
  assert.equal(hm.sharedTop([{ ...measure, rows: [1] }], "auto", 1), Math.fround(0.1), "only computed rows count");
  assert.equal(hm.sharedTop([{ plane: plane(0, 0, 0, 0), K: 2, rows: null }], "auto", 1), 1, "an all-zero map");
  assert.equal(hm.sharedTop([raw], "fixed", 7.5), 7.5, "lengths: fixed runs to the stack's largest value");
});

test("every token is labelled where labels fit 1.45 fonts apart, every k-th otherwise; the map fits its room", () => {
  // On a projector (14 px labels) the 16 tokens of the default sentence all get a label, at 1280x720 and 1024x768.
  for (const [width, room] of [[1180, 520], [930, 560]]) {
    const f = hm.mapFrame({ widest: 60, font: 14, width, room, K: 16 });
    assert.equal(f.step, 1, `${width} x ${room}: side ${f.side}`);
    assert.ok(f.side + f.bottom <= room);
  }
  for (const K of [12, 123, 129, 300, 512]) {
    for (const [width, room, maps] of [[1280, null, 1], [1280, 560, 1], [1280, 560, 2], [420, null, 1], [2000, null, 2]]) {
      const font = room === null ? 12 : 14;
      const f = hm.mapFrame({ widest: 80, font, width, room, K, maps });
      const apart = font * (f.upright ? 1.2 : 1.45); // x labels turned upright only where that names every token
      assert.ok((f.side / K) * f.step >= apart, `K ${K}: every ${f.step}th label in ${f.side} px`);
      assert.ok(f.step === 1 || ((f.side / K) * (f.step - 1) < apart && !f.upright), "no coarser than needed");
      assert.ok(f.side >= 160 && f.side <= 640);
      if (room !== null) assert.ok(f.side + f.bottom <= room || f.side === 160, "whole on the projector");
      if (room === null && width >= 1280) assert.ok(f.left + maps * f.side + f.gap + f.right <= width, "fits across");
    }
  }
});

test("two maps side by side on a projector name every token with their x labels upright where slanted ones cannot", () => {
  const stage = 1096 - hm.panelWidth(1096) - 20; // presenting at 1280 px, the controls beside the maps
  const slanted = (K) => hm.mapFrame({ widest: 60, font: 14, width: stage, room: 520, K, maps: 2 });
  const f = slanted(16);
  assert.ok(f.upright && f.step === 1 && f.side / 16 >= 14 * 1.2, JSON.stringify(f));
  assert.ok(f.gap < 60 * 0.71, "upright labels stay under their own map: the maps need no wide gap");
  assert.equal(slanted(12).upright, false, "12 tokens fit slanted: labels stay at 45°");
  assert.equal(slanted(40).upright, false, "where upright labels would not name every token either, they stay at 45°");
});

test("on a projector the controls stand beside the map where the column leaves the map more room than above it", () => {
  // presenting at 1280 and 1024 px (the component ~1100 and ~840 px wide), and at 1024 px with the sidebar unfolded
  assert.deepEqual([1096, 840, 540].map((w) => hm.besidePanel(true, w)), [true, true, false]);
  assert.equal(hm.besidePanel(false, 1096), false, "outside presentation mode the controls are always above");
  const left = (w) => w - hm.panelWidth(w) - 20; // the map's width beside the panel, which gives it the screen's room
  const side = (w, room) => hm.mapFrame({ widest: 60, font: 14, width: w, room, K: 16 }).side;
  // below the panel the map takes the column's width and the page scrolls (the controls above left it ~210 px)
  assert.ok(side(left(540), 520) === 160 && side(540, null) > 300, "at 540 px beside the panel the map kept 160 px");
  assert.ok(side(left(hm.BESIDE_MIN_PX), 520) >= 250, "from BESIDE_MIN_PX on the map beside the panel is large");
});

test("thumbnails: the model view fits a projector's room, the grid keeps 12 heads in rows of 4 or 6", () => {
  const model = hm.thumbFrame({ view: "model", width: 1180, room: 430, L: 6, H: 12, font: 14, present: true });
  assert.ok(model.H <= 430 && model.W <= 1180, JSON.stringify(model));
  assert.equal(model.cols, 12);
  const grid = hm.thumbFrame({ view: "layer", width: 1100, room: null, L: 6, H: 12, font: 12, present: false });
  assert.deepEqual([grid.cols, grid.rows], [4, 3]);
  const present = hm.thumbFrame({ view: "layer", width: 1180, room: 430, L: 6, H: 12, font: 14, present: true });
  assert.deepEqual([present.cols, present.rows], [6, 2]);
  assert.ok(present.H <= 430, JSON.stringify(present));
});

test("block means: each block's mean, block bounds as encoder/viz/axes.py's", () => {
  const p = plane(...Array.from({ length: 16 }, (_, i) => i)); // 4 x 4: row q holds 4q..4q+3
  const b = hm.blockMean(p, 4, 2);
  assert.deepEqual(b.bounds, [0, 2, 4]);
  assert.deepEqual([...b.data], [2.5, 4.5, 10.5, 12.5]);
  const same = hm.blockMean(p, 4, 4);
  assert.deepEqual([...same.data], [...p.data]);
});

test("exact values: four byte planes back to integers, printed digit by digit", () => {
  const values = Uint32Array.of(0, 1, 4123, 10000, 123456789, 4294967295);
  const n = values.length;
  const bytes = new Uint8Array(bytesOf(values));
  const planes = new Uint8Array(4 * n);
  for (let i = 0; i < n; i++) for (let b = 0; b < 4; b++) planes[b * n + i] = bytes[i * 4 + b];
  assert.deepEqual([...hm.fromPlanes(planes, n)], [...values]);
  assert.deepEqual([0, 1, 4123, 10000, 123456789].map(hm.digitText), ["0.0000", "0.0001", "0.4123", "1.0000", "12345.6789"]);
});

test("unpack: the parts of a payload, each a payload of its own; an exact part inflates to its map", async () => {
  const stack = encode({ id: "t:raw", L: 2, H: 1, T: 2, layers: [1], bits: 16, zipped: null, top: [1, 1] },
    bytesOf(Uint16Array.of(0, 65535, 65535, 0)));
  const digits = Uint32Array.of(4123, 0, 10000, 7);
  const planes = new Uint8Array(16);
  const raw = new Uint8Array(bytesOf(digits));
  for (let i = 0; i < 4; i++) for (let b = 0; b < 4; b++) planes[b * 4 + i] = raw[i * 4 + b];
  const zipped = deflateSync(planes);
  const exact = encode({ key: "raw|-|1|0|0", K: 2, zipped: [zipped.length] }, zipped);
  const body = new Uint8Array(stack.length + exact.length);
  body.set(stack);
  body.set(exact, stack.length);
  const outer = encode({ id: "t", parts: [{ kind: "stack", key: "raw" }, { kind: "exact", key: "raw|-|1|0|0" }],
    zipped: [stack.length, exact.length] }, body);
  const got = hm.unpack(outer);
  assert.equal(got.stacks.length, 1);
  const layers = new (await load()).Layers();
  layers.take(got.stacks[0].payload);
  assert.equal(layers.list(), "1");
  const back = hm.unpack(outer).exact;
  assert.equal(back.key, "raw|-|1|0|0");
  const inner = (await load()).decode(back.bytes);
  const flat = await (await load()).inflate(inner.chunks[0]);
  assert.deepEqual([...hm.fromPlanes(flat, 4)], [...digits]);
});

test("exact keys and stack ids say the same as ui/heatmap.py's", () => {
  const raw = { key: "raw", perHead: true, needsToken: false };
  const flow = { key: "flow", perHead: false, needsToken: true };
  const s = { layer: 3, head: 5, avg: false, hide_special: true, query: 7 };
  assert.equal(hm.exactKey(s, raw), "raw|-|3|5|1");
  assert.equal(hm.exactKey({ ...s, avg: true }, raw), "raw|-|3|avg|1");
  assert.equal(hm.exactKey(s, flow), "flow|7|3|-|1");
  assert.equal(hm.stackId("abc", raw, 7), "abc:raw");
  assert.equal(hm.stackId("abc", flow, 7), "abc:flow:7");
});

test("file names: the model, the view's parts and the sentence's words, at most 140 characters", () => {
  const names = { model: "all-MiniLM-L6-v2", words: "the-animal-didnt-cross" };
  assert.equal(hm.fileName(names, ["attention", "L3", "H1"]), "all-MiniLM-L6-v2_attention_L3_H1_the-animal-didnt-cross");
  assert.equal(hm.fileName({ model: "m", words: "" }, ["value", "L0", "avg"]), "m_value_L0_avg");
  assert.equal(hm.fileName({ model: "x".repeat(40), words: "y".repeat(120) }, ["a"]).length, 140);
});

test("the note: the special tokens' share per layer under raw attention and the measures, then what the measure ignores", () => {
  const meta = { raw: { label: "Raw attention", describe: "The softmax weights alone." },
    value: { label: "Value-weighted", describe: "Weights times value lengths." } };
  const shares = { raw: [0.29, 0.56], value: [0.12, 0.17] };
  const text = hm.noteText({ layer: 1, shares, measure: "value", meta, specialNames: ["[CLS]", "[SEP]"] });
  assert.equal(text, "Layer 1, mean over heads and rows: raw attention puts 56% of each row on [CLS] / [SEP]; "
    + "value-weighted, 17%. Value-weighted: Weights times value lengths.");
  assert.equal(hm.noteText({ layer: null, shares, measure: "value", meta, specialNames: ["[CLS]", "[SEP]"] }),
    "Layers 0–1, mean over heads and rows: raw attention puts 29 / 56 % of each row on [CLS] / [SEP]; "
    + "value-weighted, 12 / 17 %. Value-weighted: Weights times value lengths.", "the model view: every layer");
  assert.equal(hm.noteText({ layer: 0, shares: { raw: null }, measure: "raw", meta, specialNames: ["<s>", "</s>"] }),
    "Raw attention: The softmax weights alone.", "no share computed: only the description");
  assert.equal(hm.noteText({ layer: 0, shares, measure: "raw", meta, specialNames: [] }),
    "Raw attention: The softmax weights alone.", "a model without special tokens");
});

test("the map's title: measure, token, layer, head or average, hidden specials, training mode", () => {
  const raw = { key: "raw", label: "Raw attention", perHead: true, needsToken: false, cumulative: false, rows1: true };
  const flow = { key: "flow", label: "Attention flow", perHead: false, needsToken: true, cumulative: true, rows1: true };
  const lengths = { key: "value_raw", label: "Value-weighted (unscaled)", perHead: true, rows1: false };
  const s = { layer: 3, head: 1, avg: false, query: 2 };
  const base = { tokens: ["[CLS]", "it", "was"], H: 12, train: false, hidden: [] };
  assert.equal(hm.mapTitle({ ...base, s, m: raw }), "Attention, layer 3, head 1");
  assert.equal(hm.mapTitle({ ...base, s: { ...s, avg: true }, m: raw }), "Attention, layer 3, average of 12 heads");
  assert.equal(hm.mapTitle({ ...base, s, m: flow, hidden: ["[CLS]", "[SEP]"] }),
    "Attention flow into “was” (2), through layer 3 · [CLS] / [SEP] hidden, rows renormalised");
  assert.equal(hm.mapTitle({ ...base, s, m: lengths, hidden: ["<s>", "</s>"] }),
    "Value-weighted (unscaled), layer 3, head 1 · <s> / </s> hidden");
  assert.equal(hm.mapTitle({ ...base, s, m: raw, train: true }), "Attention, layer 3, head 1 · training mode: dropout on");
});
