// The shared base of the app's browser components (st.components.v2). ui/components.py joins this file and a
// component's own file into one ES module when it registers the component: no build step, and the component's code
// can use everything exported here. Evaluating the module touches no page (the DOM is used inside functions only),
// so node's test runner imports the same join (tests/js) and tests the pure parts.
// User text reaches the DOM only through textContent (el(), svgEl(), or canvas fillText in the exports): never as
// markup.

// One delay for every component: a pick goes back to the app (one script run: the URL, the rest of the page, the
// next payload) once the clicking has stopped this long. Someone browsing heads clicks every 0.3-0.6 s while
// reading each map, so a longer pause means they stopped; the page below still follows within a second.
export const SYNC_MS = 800;
export const MIN_LABEL_PX = 14; // presentation mode: no label smaller (the back row of a lecture hall)
export const PNG_SCALE = 3; // slide exports at 3x, as plotly's camera button (figures.png_config)
export const SVG_NS = "http://www.w3.org/2000/svg";

// ------------------------------------------------------------------------------------------------ payload
// ui/payload.py: [uint32 LE header length][header JSON][zero padding to a multiple of 8][body][tail]. The body is
// the shipped layers' uint16 LE weights one after another (header.bits 16: layers.length x H x T x T), or each
// layer's uint8 weights deflated on its own (bits 8, their sizes in header.zipped). The tail is whatever a
// component ships after the body (the map: its head's float32 weights).
export function decode(bytes) {
  const { header, body } = framed(bytes);
  let at = body;
  const out = { header, levels: header.bits === 8 ? 255 : 65535, weights: null, chunks: null };
  if (header.zipped) {
    out.chunks = header.zipped.map((size) => bytes.subarray(at, (at += size)));
  } else {
    const end = at + header.layers.length * header.H * header.T * header.T * 2;
    out.weights = aligned(bytes.subarray(at, end), Uint16Array);
    at = end;
  }
  out.tail = bytes.subarray(at);
  return out;
}

// The frame every payload shares: its header, and where its body starts (after the padding).
export function framed(bytes) {
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
  return { header: JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n))), body: Math.ceil((4 + n) / 8) * 8 };
}

// A typed array over a fresh copy of the bytes (the payload's own buffer need not be aligned for it).
export function aligned(bytes, Type) {
  const copy = bytes.slice();
  return new Type(copy.buffer, 0, Math.floor(copy.byteLength / Type.BYTES_PER_ELEMENT));
}

// Deflated bytes (zlib format) inflated by the browser's DecompressionStream, off the main thread.
export async function inflate(chunk) {
  const stream = new Blob([chunk]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// A plane is one T x T map as {data, offset, scale}: cell x = q * T + k holds data[offset + x] * scale.
export const valueAt = (plane, x) => plane.data[plane.offset + x] * plane.scale;

// The positions a map shows: all T, or with hide all but the model's special tokens (the trace's special_positions:
// [CLS]/[SEP], <s>/</s>...), all again if nothing else is left (as encoder/viz/axes.py kept does).
export function kept(T, specials, hide) {
  const skip = new Set(hide ? specials : []);
  const keep = [];
  for (let i = 0; i < T; i++) if (!skip.has(i)) keep.push(i);
  return keep.length ? keep : Array.from({ length: T }, (_, i) => i);
}

// A plane cut to the rows and columns of `keep` (K positions): a K x K plane, each row divided by its sum when
// renormalise (so attention rows sum to 1 again, as the plotly maps do with [CLS]/[SEP] hidden).
export function cut(plane, T, keep, renormalise) {
  const K = keep.length;
  const out = new Float32Array(K * K);
  const { data, offset, scale } = plane; // read in place: at 512 tokens 260,100 cells, one multiply each
  for (let i = 0; i < K; i++) {
    const from = offset + keep[i] * T;
    const at = i * K;
    let sum = 0;
    for (let j = 0; j < K; j++) sum += (out[at + j] = data[from + keep[j]] * scale);
    if (renormalise) {
      const s = 1 / Math.max(sum, 1e-30);
      for (let j = at; j < at + K; j++) out[j] *= s;
    }
  }
  return { data: out, offset: 0, scale: 1 };
}

// The maps in the browser, one layer at a time: layer -> Uint16Array or Uint8Array of H x T x T steps. Any
// non-negative (L, H, T, T) stack travels this way (H = 1 for a map without heads); header.top, a number or one per
// layer (default 1), is the value of the top step. Deflated layers are inflated as they come and handed to
// onArrive(layer).
export class Layers {
  constructor(onArrive = () => {}) {
    Object.assign(this, { onArrive, id: null, held: new Map(), means: new Map(), inflating: new Set(),
      pending: new Set() }); // pending: the inflations under way, of any trace
  }

  // A decoded payload's layers; a new trace (header.id) first drops all that was held. Returns whether it was new.
  take({ header: h, levels, weights, chunks }) {
    const fresh = h.id !== this.id;
    if (fresh) {
      Object.assign(this, { id: h.id, L: h.L, H: h.H, T: h.T, levels, inflating: new Set() });
      this.tops = Array.from({ length: h.L }, (_, n) => (Array.isArray(h.top) ? h.top[n] : h.top ?? 1));
      this.held.clear();
      this.means.clear();
      this.summing = null;
    }
    const size = this.H * this.T * this.T;
    h.layers.forEach((layer, n) => {
      if (weights) this.held.set(layer, weights.subarray(n * size, (n + 1) * size));
      else {
        const done = this.arrive(h.id, layer, chunks[n], size);
        this.pending.add(done);
        done.finally(() => this.pending.delete(done));
      }
    });
    return fresh;
  }

  // Resolves once every inflation under way has ended, its layer kept or dropped (what tests/js wait for).
  async settled() {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  async arrive(id, layer, chunk, size) {
    if (this.held.has(layer) || this.inflating.has(layer)) return; // each layer is inflated once
    this.inflating.add(layer);
    const w = await inflate(chunk);
    if (this.id !== id) return; // a newer trace came meanwhile
    this.inflating.delete(layer);
    if (w.length !== size) return;
    this.held.set(layer, w);
    this.onArrive(layer);
  }

  has(layer) {
    return this.held.has(layer);
  }

  // Half a step of a layer's values: how far a value read here can be from the model's.
  halfStep(layer) {
    return (0.5 * this.tops[layer]) / this.levels;
  }

  // The layers held, in order, as "0,1,2" (the components show it on their root's data-held).
  list() {
    return [...this.held.keys()].sort((a, b) => a - b).join(",");
  }

  // One head's plane of a layer, or null while the layer is not here.
  plane(layer, head) {
    const w = this.held.get(layer);
    return w ? { data: w, offset: head * this.T * this.T, scale: this.tops[layer] / this.levels } : null;
  }

  // The head average's plane of a layer (computed once per layer), or null while the layer is not here.
  mean(layer) {
    if (!this.held.has(layer)) return null;
    while (!this.meanStep(layer));
    return { data: this.means.get(layer), offset: 0, scale: 1 };
  }

  // One more head added to a layer's head average; true once it is whole. Idle time builds the mean a head at a
  // time (at 512 tokens a whole mean is ~15 ms, one head ~1), so the Average button finds it made.
  meanStep(layer) {
    const w = this.held.get(layer);
    if (!w || this.means.has(layer)) return true;
    const n = this.T * this.T;
    if (this.summing?.layer !== layer) this.summing = { layer, h: 0, sum: new Float32Array(n) };
    const { sum } = this.summing;
    const h = this.summing.h++;
    for (let x = 0, y = h * n; x < n; x++, y++) sum[x] += w[y];
    if (this.summing.h < this.H) return false;
    const s = this.tops[layer] / this.levels / this.H;
    for (let x = 0; x < n; x++) sum[x] *= s;
    this.means.set(layer, sum);
    this.summing = null;
    return true;
  }

  // Layers fetched one at a time: the oldest go once they pass `limit` bytes (never `keep`, the one on screen).
  trim(limit, keep) {
    let bytes = 0;
    for (const w of this.held.values()) bytes += w.byteLength;
    for (const [layer, w] of this.held) {
      if (bytes <= limit) break;
      if (layer === keep) continue;
      this.held.delete(layer);
      this.means.delete(layer);
      if (this.summing?.layer === layer) this.summing = null;
      bytes -= w.byteLength;
    }
  }
}

// A value as precisely as it travelled, given half its step (0 for float32): to 4 decimals when that is exact
// (uint16 steps of 1/65535), else to 3 with the half step (8-bit weights: "0.123 ± 0.002").
export const weightText = (w, halfStep) => (halfStep < 5e-5 ? w.toFixed(4)
  : `${w.toFixed(3)} ± ${+halfStep.toPrecision(1)}`);

// “query” (q) → “key” (k): what
export const pairText = (tokens, q, k, what) => `“${tokens[q]}” (${q}) → “${tokens[k]}” (${k}): ${what}`;

// ------------------------------------------------------------------------------------------------ colour
export const LUT = 4096; // colour lookup steps over the scale: within 0.1 of a colour level of exact interpolation
// 4096 colours along the scale's stops ([at, r, g, b]), linear in RGB between stops as plotly.js draws them.
export function palette(stops) {
  const lut = new Uint8ClampedArray(LUT * 3);
  for (let i = 0; i < LUT; i++) {
    const t = i / (LUT - 1);
    let s = 1;
    while (s < stops.length - 1 && stops[s][0] < t) s++;
    const [a, ...c0] = stops[s - 1];
    const [b, ...c1] = stops[s];
    const f = b > a ? Math.min(1, Math.max(0, (t - a) / (b - a))) : 0;
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(c0[c] + f * (c1[c] - c0[c]));
  }
  return lut;
}

// ------------------------------------------------------------------------------------------------ DOM (text only)
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; // never innerHTML: a token is text
  return e;
}

// A node's text, written only when it differs: writing the same text again still replaces the text node, and the
// browser lays it out again in the frame after an input.
export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

export function svgEl(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text; // XMLSerializer escapes it in an export
  return e;
}

// A picker: its label, then buttons 0..n-1 carrying data-<attr>; each(button, i) may dress a button.
export function picker(label, n, attr, each = () => {}) {
  return [el("span", "ee-label", label), ...Array.from({ length: n }, (_, i) => {
    const b = el("button", "ee-btn", String(i));
    b.dataset[attr] = String(i);
    each(b, i);
    return b;
  })];
}

// The bar above a view: a Layer and a Head box (for picker()), any other groups, then the export buttons, named
// by their text with their titles ({PNG: "Save ..."}). Returns {bar, layerBox, headBox, buttons}.
export function toolbar(groups, exports) {
  const [layerBox, headBox, save] = [0, 1, 2].map(() => el("div", "ee-group"));
  save.append(el("span", "ee-label", "Export"));
  const buttons = {};
  for (const [text, title] of Object.entries(exports)) {
    buttons[text] = el("button", "ee-btn", text);
    buttons[text].title = title;
    save.append(buttons[text]);
  }
  const bar = el("div", "ee-bar");
  bar.append(layerBox, headBox, ...groups, save);
  return { bar, layerBox, headBox, buttons };
}

// A line of text that screen readers announce when it changes (hover read-outs, what is drawn).
export function statusLine(cls) {
  const line = el("div", `ee-status ${cls}`);
  line.setAttribute("aria-live", "polite");
  return line;
}

// Mark the buttons of a box whose data-<attr> passes on(value) (numbers where the value is one).
export function markOn(box, attr, on) {
  for (const b of box.querySelectorAll(`button[data-${attr}]`)) {
    const v = b.dataset[attr];
    const chosen = !!on(/^\d+$/.test(v) ? +v : v);
    b.classList.toggle("on", chosen);
    b.setAttribute("aria-pressed", String(chosen)); // a screen reader says which is chosen, not only the colour
  }
}

// Clicks on a box's buttons with data-<attr>: act(value, event), the value a number where it is one.
export function onButton(hooks, box, attr, act) {
  hooks.listen(box, "click", (e) => {
    const b = e.target.closest(`button[data-${attr}]`);
    if (b) act(/^\d+$/.test(b.dataset[attr]) ? +b.dataset[attr] : b.dataset[attr], e);
  });
}

// Where a node starts from the top of the page, a scroll of Streamlit's main column undone.
export function pageTop(node) {
  const scroller = document.querySelector('[data-testid="stMain"]');
  return node.getBoundingClientRect().top + (scroller ? scroller.scrollTop : window.scrollY);
}

// A canvas w x h CSS px, its backing store at the screen's pixel ratio; returns that ratio.
export function fitCanvas(canvas, w, h) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  Object.assign(canvas.style, { width: `${w}px`, height: `${h}px` });
  return dpr;
}

// Whether a canvas already is w x h CSS px with its backing store at the screen's pixel ratio: refitting it anyway
// would reallocate and empty it.
export function fitsCanvas(canvas, w, h) {
  const dpr = window.devicePixelRatio || 1;
  return canvas.width === Math.round(w * dpr) && canvas.height === Math.round(h * dpr)
    && canvas.style.width === `${w}px` && canvas.style.height === `${h}px`;
}

// The index of the longest of some texts (in characters: a status line's worst case, measured as laid out).
export const longestAt = (texts) => texts.reduce((a, t, n) => (t.length > texts[a].length ? n : a), 0);

// The widest of some texts in a CSS font, in px.
export function widest(texts, font) {
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = font;
  return Math.max(0, ...texts.map((t) => measure.measureText(t).width));
}

// ------------------------------------------------------------------------------------------------ export
// A white canvas for a slide export: W x H CSS px drawn at PNG_SCALE.
export function exportCanvas(W, H) {
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(W * PNG_SCALE);
  canvas.height = Math.round(H * PNG_SCALE);
  const ctx = canvas.getContext("2d");
  ctx.scale(PNG_SCALE, PNG_SCALE);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, W, H);
  return ctx;
}

export function savePng(canvas, root, filename) {
  canvas.toBlob((blob) => saveBlob(root, blob, filename), "image/png");
}

export function saveSvg(svg, root, filename) {
  saveBlob(root, new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" }), filename);
}

// The file saved under its name (the link lives in the component for the click; nothing is fetched).
export function saveBlob(root, blob, filename) {
  const a = el("a");
  a.href = URL.createObjectURL(blob);
  a.download = filename;
  root.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 30_000); // not a hook: the download may outlive the view
}

// ------------------------------------------------------------------------------------------------ lifetime
// What a view hooks into the page (listeners, observers, timers, frames), undone in one call when it leaves.
export class Hooks {
  constructor() {
    Object.assign(this, { undo: [], timers: new Set(), frames: new Set(), idles: new Set() });
  }

  listen(target, type, fn, options = {}) {
    target.addEventListener(type, fn, options);
    this.undo.push(() => target.removeEventListener(type, fn, options));
  }

  // fn whenever the node or the window changes size, or the page above moves the node up or down (a title or a
  // note drawn after the view was laid out: on a projector the view sizes itself down to the screen's bottom).
  resized(node, fn) {
    const obs = new ResizeObserver(() => fn());
    obs.observe(node);
    this.undo.push(() => obs.disconnect());
    this.listen(window, "resize", () => fn());
    const page = typeof document === "undefined" ? null : document.querySelector('[data-testid="stMainBlockContainer"]');
    if (!page) return;
    let top = pageTop(node);
    const moved = new ResizeObserver(() => {
      const now = pageTop(node);
      if (Math.abs(now - top) < 1) return;
      top = now;
      fn();
    });
    moved.observe(page);
    this.undo.push(() => moved.disconnect());
  }

  // A status line whose height changes only with its width: a longer or shorter text (a hover's one line after the
  // overview's two, a readout that wraps) would move everything below it, and another row or cell under the
  // pointer. On a new width it keeps the room of the tallest of its text and the texts `longest()` says it may show,
  // measured in idle time (in the frame of the click that changed it, it cost that click its frame); it grows at
  // once if a text needs more. Returns refit(): measure again, for when what it may show changed at the same width.
  holdHeight(node, longest = () => []) {
    let width = -1;
    let queued = false;
    node.style.boxSizing = "border-box";
    const fit = () => {
      queued = false;
      node.style.minHeight = "";
      const text = node.textContent;
      const box = node.getBoundingClientRect();
      width = box.width;
      let tallest = box.height;
      for (const sample of longest()) { // text only, and put back before anything is painted
        node.textContent = sample;
        tallest = Math.max(tallest, node.getBoundingClientRect().height);
      }
      if (node.textContent !== text) node.textContent = text;
      node.style.minHeight = `${tallest}px`;
    };
    const refit = () => {
      if (queued) return;
      queued = true;
      this.idle(fit);
    };
    const obs = new ResizeObserver(([entry]) => {
      const { inlineSize, blockSize } = entry.borderBoxSize[0];
      if (Math.abs(inlineSize - width) >= 0.5) {
        width = inlineSize;
        refit();
      } else if (blockSize > parseFloat(node.style.minHeight || "0") + 0.5) {
        node.style.minHeight = `${blockSize}px`;
      }
    });
    obs.observe(node);
    this.undo.push(() => obs.disconnect());
    return refit;
  }

  later(fn, ms) {
    const id = setTimeout(() => {
      this.timers.delete(id);
      fn();
    }, ms);
    this.timers.add(id);
    return id;
  }

  clear(id) {
    clearTimeout(id);
    this.timers.delete(id);
  }

  // fn in a task of its own just after the next frame is painted: work that must not hold up the frame an input
  // is waiting for.
  afterPaint(fn) {
    this.frame(() => this.later(fn, 0));
  }

  frame(fn) {
    const id = requestAnimationFrame(() => {
      this.frames.delete(id);
      fn();
    });
    this.frames.add(id);
  }

  // fn(deadline) when the browser has nothing else to do (deadline.timeRemaining() ms left of that idle period).
  // Without requestIdleCallback (Safari), a timer with a 5 ms period.
  idle(fn) {
    if (typeof requestIdleCallback === "undefined") {
      return this.later(() => {
        const until = performance.now() + 5;
        fn({ timeRemaining: () => Math.max(0, until - performance.now()) });
      }, 0);
    }
    const id = requestIdleCallback((deadline) => {
      this.idles.delete(id);
      fn(deadline);
    });
    this.idles.add(id);
  }

  end() {
    for (const undo of this.undo.splice(0)) undo();
    for (const id of this.timers) clearTimeout(id);
    for (const id of this.frames) cancelAnimationFrame(id);
    for (const id of this.idles) cancelIdleCallback(id);
    this.timers.clear();
    this.frames.clear();
    this.idles.clear();
  }
}

// For tests and the benchmark: root.dataset.draws counts the drawings; after an input, .inputMs is the time from
// the input event to the first paint after the drawing it caused, and .painted that drawing's number.
export class Stamp {
  constructor(root, hooks) {
    Object.assign(this, { root, hooks, draws: 0, t0: undefined });
  }

  input(t0) {
    this.t0 = t0;
  }

  idle() {
    this.t0 = undefined; // the input drew nothing
  }

  drawn() {
    const n = (this.draws += 1);
    const t0 = this.t0;
    this.t0 = undefined;
    this.root.dataset.draws = String(n);
    if (t0 === undefined) return;
    this.hooks.afterPaint(() => Object.assign(this.root.dataset, {
      inputMs: (performance.now() - t0).toFixed(2), painted: String(n) }));
  }
}

// The pick back to the app. settle() sends it SYNC_MS after the last call, and waits on while ready() is false (a
// layer still coming: the app's run for it is not cut short); now() sends at once. fromApp() tells what of the
// app's selection changed on the app's side (the URL, another widget) since its last payload: never an echo of what
// this view sent, and nothing while a pick of the user's waits.
export class PickSync {
  constructor(hooks, ready, post) {
    Object.assign(this, { hooks, ready, post, timer: null, sent: null, app: null });
  }

  settle(pick) {
    this.hooks.clear(this.timer);
    this.timer = this.hooks.later(() => (this.ready() ? this.now(pick(), false) : this.settle(pick)), SYNC_MS);
  }

  now(pick, need) {
    this.hooks.clear(this.timer);
    this.timer = null;
    this.sent = pick;
    this.post("pick", { ...pick, need });
  }

  fromApp(sel, keys) {
    const prev = this.app;
    this.app = sel;
    const changed = {};
    if (!prev || this.timer !== null) return changed;
    for (const k of keys) {
      if (sel[k] !== prev[k] && !(this.sent && this.sent[k] === sel[k])) changed[k] = sel[k];
    }
    return changed;
  }
}

// A component's scaffold: its root in the parent, its listeners (ended with it) and `send`, which mount() sets to
// the component's trigger. The lesson helpers (the key listener, the file opener, the link box) are one as it is;
// View adds what a map needs.
export class Part {
  constructor(parent, cls) {
    this.root = el("div", `ee ${cls}`);
    parent.appendChild(this.root);
    this.hooks = new Hooks();
    this.send = () => {};
  }

  destroy() {
    this.hooks.end();
    this.root.remove();
  }
}

// What a component's data arrives as: the dict Streamlit passes, or its JSON text.
export const given = (data) => (typeof data === "string" ? JSON.parse(data) : data);

// What every map's view adds to a Part: a draw stamp, the layers it holds (each handed to this.arrived(layer) as it
// lands) and the sync of its pick, which waits while ready() is false. A subclass adds receive(bytes) and
// arrived(layer).
export class View extends Part {
  constructor(parent, cls, ready) {
    super(parent, cls);
    this.stamp = new Stamp(this.root, this.hooks);
    this.layers = new Layers((layer) => this.arrived(layer));
    this.sync = new PickSync(this.hooks, ready, (name, value) => this.send(name, value));
  }
}

// Streamlit calls a component's default export on every run that draws it, with the same parentElement: the view
// is made once and given each payload. The function returned is Streamlit's cleanup, run when the component leaves
// the page; Streamlit may run an older call's cleanup late (a run that raced a newer one), so only the latest call's
// tears the view down.
const VIEWS = new WeakMap(); // parentElement -> {view, calls}

export function mount({ data, parentElement, setTriggerValue }, Kind) {
  let entry = VIEWS.get(parentElement);
  if (!entry) {
    entry = { view: new Kind(parentElement), calls: 0 };
    VIEWS.set(parentElement, entry);
  }
  const call = (entry.calls += 1);
  entry.view.send = setTriggerValue;
  if (data) entry.view.receive(data);
  return () => {
    if (VIEWS.get(parentElement) !== entry || entry.calls !== call) return;
    VIEWS.delete(parentElement);
    entry.view.destroy();
  };
}
