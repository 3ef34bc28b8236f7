// ui/component_base.js under node's test runner: the payload's decoding, the layers held, the pick's timing and
// the mount/cleanup glue. The DOM helpers are exercised in Chromium (tests/app/test_headview.py, test_heatmap.py).
import assert from "node:assert/strict";
import { test } from "node:test";
import { deflateSync } from "node:zlib";

import { bytesOf, encode, load } from "./load.mjs";

const base = await load();

const header16 = (L, H, T, extra = {}) => ({ id: "a", L, H, T, layers: [...Array(L).keys()], bits: 16, zipped: null, ...extra });

test("decode: uint16 layers, then the tail, whatever the header's length", () => {
  for (const pad of ["", "x", "xyz", "0123456"]) { // every alignment of the body
    const weights = Uint16Array.from({ length: 2 * 3 * 4 * 4 }, (_, i) => i * 1000);
    const tail = Float32Array.of(0.25, 0.5);
    const got = base.decode(encode(header16(2, 3, 4, { pad }), bytesOf(weights), bytesOf(tail)));
    assert.equal(got.header.pad, pad);
    assert.equal(got.levels, 65535);
    assert.equal(got.chunks, null);
    assert.deepEqual([...got.weights], [...weights]);
    assert.deepEqual([...base.aligned(got.tail, Float32Array)], [0.25, 0.5]);
  }
});

test("decode: deflated 8-bit layers by their sizes, then the tail; inflate gives each layer back", async () => {
  const layers = [Uint8Array.from({ length: 2 * 9 }, (_, i) => i), Uint8Array.from({ length: 2 * 9 }, (_, i) => 255 - i)];
  const zipped = layers.map((w) => deflateSync(w));
  const body = new Uint8Array(zipped.reduce((n, z) => n + z.length, 0));
  zipped.reduce((at, z) => (body.set(z, at), at + z.length), 0);
  const header = { id: "b", L: 2, H: 2, T: 3, layers: [1, 0], bits: 8, zipped: zipped.map((z) => z.length) };
  const got = base.decode(encode(header, body, bytesOf(Float32Array.of(1))));
  assert.equal(got.levels, 255);
  assert.equal(got.weights, null);
  assert.deepEqual(await Promise.all(got.chunks.map(base.inflate)), layers);
  assert.deepEqual([...base.aligned(got.tail, Float32Array)], [1]);
});

test("an empty tail is an empty array", () => {
  const got = base.decode(encode(header16(1, 1, 2), bytesOf(new Uint16Array(4))));
  assert.equal(base.aligned(got.tail, Float32Array).length, 0);
});

test("Layers: a head mean built a head at a time (idle time) is the mean over heads, however the steps interleave", () => {
  const layers = new base.Layers();
  const heads = [[0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1], [0, 0, 0, 1], [0, 1, 0, 1]]; // 2 layers x 3
  const w = Uint16Array.from(heads.flat(), (x) => x * 65535);
  layers.take(base.decode(encode(header16(2, 3, 2), bytesOf(w))));
  assert.deepEqual([layers.meanStep(0), layers.meanStep(0)], [false, false], "heads 0 and 1 of 3 added");
  const first = layers.mean(1); // another layer's mean asked for meanwhile: layer 0's part-sum starts again later
  assert.deepEqual([0, 1, 2, 3].map((x) => +base.valueAt(first, x).toFixed(6)), [0.333333, 0.333333, 0, 1]);
  assert.equal(layers.meanStep(0), false);
  assert.deepEqual([layers.meanStep(0), layers.meanStep(0), layers.meanStep(0)], [false, true, true]);
  assert.deepEqual([0, 1, 2, 3].map((x) => +base.valueAt(layers.mean(0), x).toFixed(6)),
    [0.333333, 0.666667, 0.666667, 0.333333]);
});

test("Layers: takes uint16 layers at once, planes and means read them, a new trace drops them", () => {
  const layers = new base.Layers();
  const weights = Uint16Array.from({ length: 2 * 2 * 2 * 2 }, (_, i) => i * 4369); // steps of 4369 = 1/15
  assert.equal(layers.take(base.decode(encode(header16(2, 2, 2), bytesOf(weights)))), true);
  assert.equal(layers.list(), "0,1");
  const plane = layers.plane(1, 1); // layer 1, head 1: cells 12..15
  assert.deepEqual([0, 1, 2, 3].map((x) => +base.valueAt(plane, x).toFixed(6)), [0.8, 0.866667, 0.933333, 1]);
  const mean = layers.mean(1); // heads 0 and 1 of layer 1: cells 8..11 and 12..15
  assert.deepEqual([0, 1, 2, 3].map((x) => +base.valueAt(mean, x).toFixed(6)), [0.666667, 0.733333, 0.8, 0.866667]);
  assert.equal(layers.take(base.decode(encode(header16(2, 2, 2), bytesOf(weights)))), false, "same id: not new");
  assert.equal(layers.take(base.decode(encode({ ...header16(1, 2, 2), id: "c", layers: [] }, new Uint8Array(0)))), true);
  assert.equal(layers.list(), "");
  assert.equal(layers.plane(0, 0), null);
  assert.equal(layers.mean(0), null);
});

test("Layers: a map that is not attention ships its top value in the header", () => {
  const layers = new base.Layers();
  layers.take(base.decode(encode(header16(2, 1, 1, { top: [2, 0.5] }), bytesOf(Uint16Array.of(65535, 32768)))));
  assert.equal(base.valueAt(layers.plane(0, 0), 0), 2);
  assert.ok(Math.abs(base.valueAt(layers.plane(1, 0), 0) - 0.25) < 1e-5);
  assert.equal(base.valueAt(layers.mean(0), 0), 2);
  assert.equal(layers.halfStep(0), 1 / 65535);
});

test("Layers: deflated layers arrive one by one; one inflated for an older trace is dropped", async () => {
  const arrived = [];
  const layers = new base.Layers((n) => arrived.push(n));
  const payload = (id, n) => {
    const z = deflateSync(Uint8Array.of(255, 0, 51, 102));
    return base.decode(encode({ id, L: 3, H: 1, T: 2, layers: [n], bits: 8, zipped: [z.length] }, z));
  };
  layers.take(payload("x", 2));
  layers.take(payload("y", 1)); // a new trace before layer 2 of "x" was inflated
  assert.equal(layers.pending.size, 2);
  await layers.settled(); // both inflations ended: one kept, one dropped
  assert.deepEqual(arrived, [1]);
  assert.equal(layers.pending.size, 0);
  assert.equal(layers.list(), "1");
  assert.deepEqual([0, 1, 2, 3].map((x) => base.valueAt(layers.plane(1, 0), x)), [1, 0, 0.2, 0.4]);
});

test("Layers.trim drops the oldest layers past the limit, never the one kept", () => {
  const layers = new base.Layers();
  layers.take(base.decode(encode(header16(3, 1, 2), bytesOf(new Uint16Array(12))))); // 8 bytes a layer
  layers.trim(16, 0);
  assert.equal(layers.list(), "0,2");
  layers.trim(0, 2);
  assert.equal(layers.list(), "2");
});

test("weights are shown as precisely as they travelled", () => {
  assert.equal(base.weightText(0.123456, 0), "0.1235"); // float32
  assert.equal(base.weightText(0.123456, 0.5 / 65535), "0.1235"); // uint16 steps: exact to 4 decimals
  assert.equal(base.weightText(0.123456, 0.5 / 255), "0.123 ± 0.002"); // 8-bit
  assert.equal(base.weightText(12.3456, (0.5 * 40) / 255), "12.346 ± 0.08"); // 8-bit steps of a top of 40
  assert.equal(base.pairText(["<b>", "x"], 0, 1, "0.5"), "“<b>” (0) → “x” (1): 0.5");
});

// Timers under the test's control: later() queues, run() fires what is due.
function fakeHooks() {
  const queue = new Map();
  let next = 1;
  return {
    queue,
    later(fn, ms) {
      queue.set(next, { fn, ms });
      return next++;
    },
    clear(id) {
      queue.delete(id);
    },
    run() {
      const due = [...queue.entries()];
      queue.clear();
      for (const [, { fn }] of due) fn();
    },
  };
}

test("PickSync: one pick after the clicking stops, held back while the view is not ready", () => {
  const hooks = fakeHooks();
  const posted = [];
  let ready = false;
  let layer = 0;
  const sync = new base.PickSync(hooks, () => ready, (name, value) => posted.push([name, value]));
  for (layer of [1, 2, 3]) sync.settle(() => ({ layer }));
  assert.equal(hooks.queue.size, 1, "each click restarts the one timer");
  assert.equal([...hooks.queue.values()][0].ms, base.SYNC_MS);
  hooks.run(); // not ready: waits another SYNC_MS
  assert.deepEqual(posted, []);
  ready = true;
  hooks.run();
  assert.deepEqual(posted, [["pick", { layer: 3, need: false }]]);
  assert.equal(sync.timer, null);
  sync.now({ layer: 5 }, true);
  assert.deepEqual(posted.at(-1), ["pick", { layer: 5, need: true }]);
});

test("PickSync.fromApp: what changed on the app's side, never an echo, nothing while a pick waits", () => {
  const hooks = fakeHooks();
  const sync = new base.PickSync(hooks, () => true, () => {});
  assert.deepEqual(sync.fromApp({ layer: 1, head: 2 }, ["layer", "head"]), {}, "the first selection is applied whole");
  assert.deepEqual(sync.fromApp({ layer: 4, head: 2 }, ["layer", "head"]), { layer: 4 }, "the URL moved the layer");
  sync.now({ layer: 0, head: 7 }, false);
  assert.deepEqual(sync.fromApp({ layer: 0, head: 7 }, ["layer", "head"]), {}, "the app echoes this view's pick");
  sync.settle(() => ({ layer: 3, head: 7 }));
  assert.deepEqual(sync.fromApp({ layer: 5, head: 1 }, ["layer", "head"]), {}, "a pick of the user's waits");
});

test("mount: one view per parent, each payload given to it; only the latest call's cleanup ends it", () => {
  const made = [];
  class Fake {
    constructor(parent) {
      Object.assign(this, { parent, got: [], ended: 0 });
      made.push(this);
    }

    receive(data) {
      this.got.push(data);
    }

    destroy() {
      this.ended += 1;
    }
  }
  const parent = {};
  const send = () => {};
  const first = base.mount({ data: "a", parentElement: parent, setTriggerValue: send }, Fake);
  const second = base.mount({ data: "b", parentElement: parent, setTriggerValue: send }, Fake);
  assert.equal(made.length, 1);
  assert.deepEqual(made[0].got, ["a", "b"]);
  assert.equal(made[0].send, send);
  first(); // an older run's cleanup, late: the view stays
  assert.equal(made[0].ended, 0);
  second();
  assert.equal(made[0].ended, 1);
  second(); // twice is once
  assert.equal(made[0].ended, 1);
  base.mount({ data: null, parentElement: parent, setTriggerValue: send }, Fake);
  assert.equal(made.length, 2, "a component back on the page gets a new view");
  assert.deepEqual(made[1].got, []);
});

test("kept: all positions, or all but the special ones (whatever the model calls them), never none", () => {
  assert.deepEqual(base.kept(4, [0, 3], false), [0, 1, 2, 3]);
  assert.deepEqual(base.kept(4, [0, 3], true), [1, 2]);
  assert.deepEqual(base.kept(5, [0, 2, 4], true), [1, 3], "a [SEP] typed in the sentence is special too");
  assert.deepEqual(base.kept(2, [0, 1], true), [0, 1]);
  assert.deepEqual(base.kept(3, [], true), [0, 1, 2], "a model without special tokens");
  assert.deepEqual(base.kept(3, [0, 2], true), [1], "RoBERTa's <s> and </s>, by position");
});

test("cut: the kept rows and columns, rows renormalised to sum to 1 (an empty row stays 0)", () => {
  const plane = { data: Float32Array.of(0.5, 0.25, 0.25, 0, 0.2, 0.8, 0.6, 0, 0.4), offset: 0, scale: 1 };
  const keep = [1, 2];
  const rows = (p) => [[0, 1], [2, 3]].map((r) => r.map((x) => +base.valueAt(p, x).toFixed(6)));
  assert.deepEqual(rows(base.cut(plane, 3, keep, false)), [[0.2, 0.8], [0, 0.4]]);
  assert.deepEqual(rows(base.cut(plane, 3, keep, true)), [[0.2, 0.8], [0, 1]]);
  const zero = { data: new Float32Array(4), offset: 0, scale: 1 };
  assert.deepEqual(rows(base.cut(zero, 2, [0, 1], true)), [[0, 0], [0, 0]]);
});

test("Hooks.idle without requestIdleCallback (Safari): a timer whose 5 ms deadline runs out; end() drops it", async () => {
  assert.equal(typeof requestIdleCallback, "undefined");
  const hooks = new base.Hooks();
  const left = await new Promise((resolve) => hooks.idle((deadline) => {
    const first = deadline.timeRemaining();
    const until = performance.now() + 7;
    while (performance.now() < until); // busy past the idle period
    resolve([first, deadline.timeRemaining()]);
  }));
  assert.ok(left[0] > 0 && left[0] <= 5, `first ${left[0]}`);
  assert.equal(left[1], 0);
  let ran = false;
  hooks.idle(() => (ran = true));
  hooks.end();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(ran, false);
});

test("fitsCanvas: only a canvas of that CSS size with its backing store at the screen's ratio fits", () => {
  const before = globalThis.window;
  globalThis.window = { devicePixelRatio: 2 };
  try {
    const canvas = { width: 0, height: 0, style: {} };
    assert.equal(base.fitsCanvas(canvas, 100, 50), false);
    assert.equal(base.fitCanvas(canvas, 100, 50), 2);
    assert.deepEqual([canvas.width, canvas.height, canvas.style.width, canvas.style.height], [200, 100, "100px", "50px"]);
    assert.equal(base.fitsCanvas(canvas, 100, 50), true);
    assert.equal(base.fitsCanvas(canvas, 100, 51), false);
    globalThis.window = { devicePixelRatio: 1 }; // the page zoomed out: the same CSS size needs another backing store
    assert.equal(base.fitsCanvas(canvas, 100, 50), false);
  } finally {
    globalThis.window = before;
  }
});

test("given: a component's data as Streamlit passes it, a dict or its JSON text, read the same", () => {
  const data = { link: "http://127.0.0.1:8501/lessons?lesson=x", label: "“quoted” <b>" };
  assert.deepEqual(base.given(data), data);
  assert.deepEqual(base.given(JSON.stringify(data)), data);
  assert.throws(() => base.given("{not json"), SyntaxError);
});
