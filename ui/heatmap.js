// The attention map (issues 15, 19, 23, 27): one head (or the head average, or raw attention beside a measure), all
// heads of a layer, or every layer x head, under any registered measure, drawn on canvases at every sentence length.
// Joined after ui/component_base.js (ui/components.py). The payload (ui/heatmap.py `data`) holds parts: each
// measure's layers as the head view's (uint16 up to 128 tokens, 8-bit deflated past that: the base's Layers hold
// them), and the one-head map on screen as its exact four decimals. Every switch (layer, head, average, hidden
// special tokens, colour scale, measure, raw beside it, view by a thumbnail's click) is drawn from what the browser
// holds; what it lacks is asked for at once, and the settled choice goes back to the app once the clicking stops.
// Each pick says what the browser holds, so the app sends only what it lacks.
// In four parts: layout (sizes and labels), drawing (maps, thumbnails, the note, PNG), input, sync.

const MAX_SIDE = 640; // the map's largest side in px outside presentation mode
const BAR_W = 18;
const COARSE_READ = "Hover a cell for its value. Colours from 8-bit values (± 0.002 of the largest) until the exact "
  + "ones arrive.";
const BAR_ROWS = 512; // the colour bars' rows, drawn once per palette
const DIGITS = 10000; // ui/payload.py DIGITS: an exact map travels as round(value * 10^4)
const LABEL_GAP = 1.45; // labels this many font sizes apart at least: x labels turned 45° then clear each other
const UPRIGHT_GAP = 1.2; // or this many with the x labels turned upright (as plotly spaces category labels)
const UNCOMPUTED = [233, 236, 239]; // rows a measure did not compute (attention flow: one row), never a colour
const THUMB_CELLS = { layer: 64, model: 32 }; // thumbnails are block means of at most this many tokens a side
const SCALE_NAMES = { fixed: "0 to 1", auto: "Auto", row: "Per row" }; // ui/settings.py SCALE_LABELS
const PICKED = ["view", "layer", "head", "avg", "hide_special", "scale", "measure", "beside", "query"];
// Thumbnails not yet computed are computed in tasks after each paint, this long at most: the frame an input waits for
// does none of it, and an input arriving meanwhile waits no longer than this.
const CHUNK_MS = 6;
const CUTS_KEPT = 8; // planes cut to the shown positions, kept for toggling back (at 512 tokens 1 MB each)
const WARM_SLACK_MS = 3; // idle-time work starts a step only with this much of the idle period left
// Presentation mode: the controls' column beside the picture (ui/heatmap.css: at least 17.5em of 16 px), so the
// picture keeps the rest of the width and the screen's height below the page's title.
export const panelWidth = (width) => Math.max(PANEL_PX, Math.round(0.28 * width));
const PANEL_PX = 280;
// Narrower than this (presenting at 1024 px with the sidebar unfolded again: ~540 px), the controls go above the
// picture as outside presentation mode: beside it they ran past the column's right edge and left the map 160 px.
export const BESIDE_MIN_PX = 760;
export const besidePanel = (present, width) => present && width >= BESIDE_MIN_PX;

// ------------------------------------------------------------------------------------------------ the payload
// ui/heatmap.py `data`: an outer payload whose header.zipped sizes its parts and header.parts says what each is:
// {kind: "stack", key}: a measure's layers, itself a payload (decode, Layers.take); {kind: "exact", key}: the map
// on screen as round(value * 10^4) uint32, byte planes low to high, deflated.
export function unpack(bytes) {
  const outer = decode(bytes);
  const parts = outer.header.parts.map((p, n) => ({ ...p, bytes: outer.chunks[n] }));
  return {
    header: outer.header,
    stacks: parts.filter((p) => p.kind === "stack").map((p) => ({ key: p.key, payload: decode(p.bytes) })),
    exact: parts.find((p) => p.kind === "exact") ?? null,
  };
}

// Four inflated byte planes of n cells back into uint32 values.
export function fromPlanes(p, n) {
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) out[i] = p[i] + p[n + i] * 256 + p[2 * n + i] * 65536 + p[3 * n + i] * 16777216;
  return out;
}

// An exact value's text, digit by digit from the integer (no rounding in between): 4123 -> "0.4123".
export const digitText = (n) => `${Math.floor(n / DIGITS)}.${String(n % DIGITS).padStart(4, "0")}`;

// encoder/viz/export.py `export_name` from its pieces: the model, the view's parts, the sentence's first words.
export function fileName(names, parts) {
  const joined = [names.model, ...parts, names.words].filter(Boolean).join("_");
  return joined.slice(0, 140).replace(/^[-_]+|[-_]+$/g, "") || "figure";
}

// ui/heatmap.py `exact_key`: which map an exact part holds.
export function exactKey(s, m) {
  const head = m.perHead ? (s.avg ? "avg" : s.head) : "-";
  return `${m.key}|${m.needsToken ? s.query : "-"}|${s.layer}|${head}|${s.hide_special ? 1 : 0}`;
}

// ui/heatmap.py `stack_id`: what the app calls a measure's maps of a trace (attention flow: of one token).
export const stackId = (id, m, query) => `${id}:${m.key}${m.needsToken ? `:${query}` : ""}`;

// ------------------------------------------------------------------------------------------------ layout
// The one-head figure's geometry from the widest label (px), the font, the room across and, in presentation mode,
// the room down to the bottom of the screen (else null), for `maps` maps side by side (raw beside a measure): the
// margins, each map's side, and `step`: every how many tokens a label fits LABEL_GAP fonts from the next. Where
// that leaves tokens unnamed but x labels turned upright name them all (UPRIGHT_GAP fonts apart, as rows are; two
// maps side by side on a projector), they are turned upright (`upright`).
export function mapFrame({ widest, font, width, room, K, maps = 1 }) {
  const frame = (upright) => {
    const left = Math.ceil(widest + font * 2 + 14);
    const bottom = Math.ceil(widest * (upright ? 1 : 0.71) + font * 2.4 + 10);
    const right = BAR_W + font * 4 + 24;
    // The left map's last x label leans into the gap; an upright one stays under its column.
    const gap = maps > 1 ? Math.ceil(upright ? font : widest * 0.71 + font) : 0;
    let side = Math.min(MAX_SIDE, (width - left - right - gap) / maps);
    if (room !== null) side = Math.min(side, room - bottom - font * (maps > 1 ? 2 : 0) - 8);
    side = Math.max(160, Math.floor(side));
    const step = Math.max(1, Math.ceil((K * font * (upright ? UPRIGHT_GAP : LABEL_GAP)) / side));
    return { left, bottom, right, side, step, gap, upright };
  };
  const slanted = frame(false);
  if (slanted.step === 1) return slanted;
  const upright = frame(true);
  return upright.step === 1 ? upright : slanted;
}

// The thumbnails' geometry: the layer's heads in rows of `cols`, or every layer (rows) x head (columns); each
// thumbnail `cell` px, a label line above it (and the layer's label left of a model view's row).
export function thumbFrame({ view, width, room, L, H, font, present }) {
  const label = Math.ceil(font * 1.5);
  const left = view === "model" ? Math.ceil(font * 3) : 0;
  const cols = view === "model" ? H : Math.min(H, present ? 6 : 4);
  const rows = view === "model" ? L : Math.ceil(H / cols);
  const gap = view === "model" ? 6 : 14;
  let cell = Math.floor((width - left) / cols - gap);
  cell = Math.min(cell, view === "model" ? 110 : 300);
  if (room !== null) cell = Math.min(cell, Math.floor((room - label - 8) / rows - gap - (view === "model" ? 0 : label)));
  cell = Math.max(view === "model" ? 12 : 40, cell);
  const rowH = cell + gap + (view === "model" ? 0 : label);
  return { label, left, cols, rows, gap, cell, rowH, top: label, W: left + cols * (cell + gap), H: label + rows * rowH };
}

// ------------------------------------------------------------------------------------------------ drawing
// The largest value of a K x K plane (over `rows` only, when given), or 0.
export function planeMax(plane, K, rows = null) {
  let m = 0;
  for (const q of rows ?? Array.from({ length: K }, (_, i) => i)) {
    for (let k = 0, x = q * K; k < K; k++, x++) m = Math.max(m, valueAt(plane, x));
  }
  return m;
}

// The colour scale's top for maps shown together (one scale for all): `fixed` (1 for shares and weights, a stack's
// largest value for lengths), the largest value shown (auto), or 1 per row (each row divided by its own maximum).
export function sharedTop(maps, scale, fixed) {
  if (scale === "row") return 1;
  if (scale === "fixed") return fixed;
  const m = Math.max(0, ...maps.map((x) => planeMax(x.plane, x.K, x.rows)));
  return m > 0 ? m : 1;
}

// The palette as one 32-bit RGBA word per colour, in the byte order of the platform (written through bytes), so a
// pixel is one store. Kept per palette.
const WORDS = new WeakMap();
function words(lut) {
  if (!WORDS.has(lut)) {
    const out = new Uint32Array(LUT);
    const bytes = new Uint8Array(out.buffer);
    for (let i = 0; i < LUT; i++) bytes.set([lut[i * 3], lut[i * 3 + 1], lut[i * 3 + 2], 255], i * 4);
    WORDS.set(lut, out);
  }
  return WORDS.get(lut);
}
const GREY = words(Uint8ClampedArray.from({ length: LUT * 3 }, (_, i) => UNCOMPUTED[i % 3]))[0];

// One RGBA pixel per cell of a K x K plane into px, coloured on 0..top (scale "row": each row on 0..its maximum);
// rows outside `rows` (when given) in the grey of "not computed". A value's colour is round(value / top * 4095),
// clamped to the palette: at 512 tokens one pass over 262,144 cells, one 32-bit store each.
export function paint(px, plane, K, { scale, top, lut, rows = null }) {
  const computed = rows === null ? null : new Set(rows);
  const { data, offset, scale: unit } = plane;
  const out = new Uint32Array(px.buffer, px.byteOffset, K * K);
  const colours = words(lut);
  const last = LUT - 1;
  for (let q = 0; q < K; q++) {
    const start = q * K;
    if (computed && !computed.has(q)) {
      out.fill(GREY, start, start + K);
      continue;
    }
    let m = top;
    if (scale === "row") {
      m = 0;
      for (let x = offset + start; x < offset + start + K; x++) if (data[x] > m) m = data[x];
      m = Math.max(m * unit, 1e-30);
    }
    const f = (last * unit) / m;
    for (let x = start, d = offset + start; x < start + K; x++, d++) {
      const c = data[d] * f + 0.5; // NaN and negatives fall to 0, past the top to the last colour
      out[x] = colours[c >= last ? last : c > 0 ? c | 0 : 0];
    }
  }
}

// V8 optimises paint() and cut() only after several calls, and again each time a plane of another array type comes
// (held layers: Uint8Array or Uint16Array; head means and cuts: Float32Array; exact decimals: Uint32Array). In
// Chromium here the first 512 x 512 paints took 7-25 ms and the first cut 8 ms, against 1-3 ms once optimised: the
// first toggles after opening the map paid for it. Once per page, in idle time, both run on small planes of every
// one of those types, so the first toggle finds them optimised for all of them.
const REHEARSAL = { K: 96, rounds: 20, done: false };
function rehearse(hooks, lut) {
  if (REHEARSAL.done) return;
  REHEARSAL.done = true;
  const { K } = REHEARSAL;
  const px = new Uint8ClampedArray(K * K * 4);
  const keep = Array.from({ length: K - 2 }, (_, i) => i + 1);
  const kinds = [Uint8Array, Uint16Array, Float32Array, Uint32Array];
  const jobs = Array.from({ length: REHEARSAL.rounds * kinds.length }, (_, i) => kinds[i % kinds.length]);
  const step = (deadline) => {
    while (jobs.length && deadline.timeRemaining() > WARM_SLACK_MS) {
      const plane = { data: new (jobs.shift())(K * K).fill(3), offset: 0, scale: 0.01 };
      for (const scale of ["fixed", "row"]) paint(px, plane, K, { scale, top: 1, lut });
      cut(plane, K, keep, true);
    }
    if (jobs.length) hooks.idle(step);
  };
  hooks.idle(step);
}

// A K x K plane as the mean of n x n blocks (n <= K), as encoder/viz/axes.py block_mean: block i covers positions
// bounds[i]..bounds[i + 1] - 1.
export function blockMean(plane, K, n) {
  const bounds = Array.from({ length: n + 1 }, (_, i) => Math.round((i * K) / n));
  const out = new Float32Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let q = bounds[i]; q < bounds[i + 1]; q++) {
        for (let k = bounds[j], x = q * K + k; k < bounds[j + 1]; k++, x++) s += plane.data[plane.offset + x];
      }
      out[i * n + j] = (s * plane.scale) / ((bounds[i + 1] - bounds[i]) * (bounds[j + 1] - bounds[j]));
    }
  }
  return { data: out, offset: 0, scale: 1, bounds };
}

// The note under the map, true for the trace on screen: the special tokens' share of each row in this layer under
// raw attention and under the measures the app computed (ui/heatmap.py `special_shares`), then what the chosen
// measure includes and ignores.
// layer null: every layer's share, in order (the model view shows every layer).
export function noteText({ layer, shares, measure, meta, specialNames }) {
  const parts = [];
  for (const [key, per] of Object.entries(shares ?? {})) {
    if (!per || (layer !== null && per[layer] === undefined)) continue;
    const pct = layer === null ? per.map((x) => `${Math.round(x * 100)}`).join(" / ") + " %" : `${Math.round(per[layer] * 100)}%`;
    parts.push(parts.length ? `${meta[key].label.toLowerCase()}, ${pct}`
      : `${meta[key].label.toLowerCase()} puts ${pct} of each row on ${specialNames.join(" / ")}`);
  }
  const where = layer === null ? `Layers 0–${Object.values(shares).find(Boolean).length - 1}` : `Layer ${layer}`;
  const share = specialNames.length && parts.length ? `${where}, mean over heads and rows: ${parts.join("; ")}. ` : "";
  return `${share}${meta[measure].label}: ${meta[measure].describe}`;
}

// The one-head map's title: the measure (raw attention: "Attention"), the token it is computed for, the layer (or
// through it, for measures that accumulate), the head or the average, hidden special tokens, and training mode.
export function mapTitle({ s, m, tokens, H, train, hidden }) {
  const name = m.key === "raw" ? "Attention" : m.label;
  const who = !m.perHead ? "" : s.avg ? `, average of ${H} heads` : `, head ${s.head}`;
  const into = m.needsToken ? ` into “${tokens[s.query]}” (${s.query})` : "";
  const where = m.cumulative ? `, through layer ${s.layer}` : `, layer ${s.layer}`;
  const gone = hidden.length ? ` · ${hidden.join(" / ")} hidden${m.rows1 ? ", rows renormalised" : ""}` : "";
  return `${name}${into}${where}${who}${gone}${train ? " · training mode: dropout on" : ""}`;
}

// A colour bar: the palette from the top of the scale (top of the canvas) down to 0. Drawn again only when the
// palette or its backing store changed (a new size empties it: sizeBar() forgets it).
const BARS = new WeakMap(); // canvas -> the palette drawn on it
function drawBar(canvas, lut) {
  if (BARS.get(canvas) === lut) return;
  BARS.set(canvas, lut);
  const ctx = canvas.getContext("2d");
  const h = canvas.height;
  for (let y = 0; y < h; y++) {
    const c = Math.round((1 - y / Math.max(1, h - 1)) * (LUT - 1)) * 3;
    ctx.fillStyle = `rgb(${lut[c]},${lut[c + 1]},${lut[c + 2]})`;
    ctx.fillRect(0, y, canvas.width, 1);
  }
}

// A colour bar h px tall: its backing store is BAR_ROWS rows at every height (the palette runs smoothly from one
// colour to the next, so CSS may stretch it), so a new side neither reallocates nor repaints it.
function sizeBar(canvas, h) {
  if (canvas.height !== BAR_ROWS) {
    Object.assign(canvas, { width: BAR_W, height: BAR_ROWS });
    BARS.delete(canvas);
  }
  Object.assign(canvas.style, { width: `${BAR_W}px`, height: `${h}px` });
}

// Five tick labels from 0 to top beside a bar at x, from y (top) down `height` px, in `box`: its five spans are
// made once, then only what changed is written.
function barTicks(box, top, x, y, height) {
  if (box.children.length !== 5) box.replaceChildren(...[0, 1, 2, 3, 4].map(() => el("span", "hm-tick hm-c")));
  [...box.children].forEach((t, n) => {
    setText(t, ((top * n) / 4).toFixed(top < 0.1 ? 3 : 2));
    const [left, at] = [`${x}px`, `${y + height * (1 - n / 4)}px`];
    if (t.style.left !== left) t.style.left = left;
    if (t.style.top !== at) t.style.top = at;
  });
}

class AttentionMap extends View {
  constructor(parent) {
    super(parent, "hm", () => this.missing().length === 0);
    Object.assign(this, { stacks: new Map(), exact: null, at: null, asked: null, geometry: "", thumbs: new Map(),
      cuts: new Map(), nonce: Math.random().toString(36).slice(2, 10), refused: {}, shares: {}, s: null });
    this.build();
    this.wire();
  }

  build() {
    this.measureBox = el("div", "ee-group");
    const measureLabel = el("label", "ee-label", "Measure");
    this.measureSelect = el("select", "hm-select");
    measureLabel.append(this.measureSelect);
    this.measureBox.append(measureLabel);
    this.flagBox = el("div", "ee-group");
    for (const [flag, text] of [["hide_special", "Hide specials"], ["beside", "Beside raw"]]) {
      const b = el("button", "ee-btn", text);
      b.dataset.flag = flag;
      this.flagBox.append(b);
    }
    this.scaleBox = el("div", "ee-group");
    this.scaleBox.append(el("span", "ee-label", "Colours"));
    for (const [scale, text] of Object.entries(SCALE_NAMES)) {
      const b = el("button", "ee-btn", text);
      b.dataset.scale = scale;
      this.scaleBox.append(b);
    }
    const { bar, layerBox, headBox, buttons } = toolbar([this.measureBox, this.flagBox, this.scaleBox],
      { PNG: "Save this picture as a PNG for slides" });
    Object.assign(this, { layerBox, headBox, buttons });
    this.reason = el("div", "hm-reason");
    const heading = el("div", "hm-heading");
    this.title = el("div", "hm-title");
    this.read = statusLine("hm-read");
    this.sub = el("div", "hm-sub");
    heading.append(this.title, this.read);
    this.fig = el("div", "hm-fig");
    this.mapTitles = [0, 1].map(() => el("div", "hm-axis hm-maptitle"));
    this.maps = [0, 1].map(() => el("canvas", "hm-map"));
    // The left map has a canvas for each layout (one map, or raw beside a measure), each kept at its size: Beside raw
    // swaps one for the other. Resizing one instead (a new backing store, a new layer) made that click miss its frame.
    this.lefts = [this.maps[0], el("canvas", "hm-map")];
    this.xTicks = [0, 1].map(() => el("div", "hm-ticks"));
    this.xTitles = [0, 1].map(() => el("div", "hm-axis hm-xtitle", "key (attended to)"));
    this.yTitle = el("div", "hm-axis hm-ytitle", "query (attending)");
    this.yTicks = el("div", "hm-ticks");
    this.cbar = el("canvas", "hm-cbar");
    this.cTicks = el("div", "hm-ticks");
    this.cTitle = el("div", "hm-axis hm-ctitle");
    this.fig.append(this.yTitle, this.yTicks, ...this.mapTitles, ...this.maps, ...this.xTicks, ...this.xTitles,
      this.cbar, this.cTicks, this.cTitle);
    this.grid = el("div", "hm-grid");
    this.thumbCanvas = el("canvas", "hm-thumbs");
    this.thumbLabels = el("div", "hm-ticks");
    this.thumbBar = el("canvas", "hm-cbar");
    this.thumbTicks = el("div", "hm-ticks");
    this.grid.append(this.thumbCanvas, this.thumbLabels, this.thumbBar, this.thumbTicks);
    this.note = el("div", "hm-note");
    this.stage = el("div", "hm-stage");
    this.stage.append(this.fig, this.grid);
    // Outside presentation mode the controls sit above the picture; on a projector beside it (ui/heatmap.css), so
    // the picture gets the screen's whole height below the page's title.
    this.root.append(bar, this.reason, heading, this.sub, this.stage, this.note);
    this.sources = [0, 1].map(() => el("canvas")); // K x K, one pixel per cell
    this.images = [null, null]; // their pixels, kept while K stays
    this.scratch = el("canvas"); // a thumbnail's n x n pixels
  }

  // ---------------------------------------------------------------------------------------------- data
  receive(bytes) {
    const { header: h, stacks, exact } = unpack(bytes);
    const fresh = h.id !== this.id;
    if (fresh) {
      Object.assign(this, { id: h.id, T: h.T, L: h.L, H: h.H, tokens: h.tokens, labels: h.labels, specials: h.specials,
        specialNames: h.specialNames, exact: null, at: null, geometry: "" });
      this.stacks.clear();
      this.thumbs.clear();
      this.cuts.clear();
      this.widestAt = {};
    }
    this.meta = Object.fromEntries(h.measures.map((m) => [m.key, m]));
    Object.assign(this, { refused: h.refused, shares: h.shares, train: h.train, names: h.names, asked: null });
    this.sub.textContent = h.sentence; // the sentence, as the plotly charts' subtitle quotes it
    if (!this.lut || this.stopsKey !== JSON.stringify(h.stops)) {
      this.stopsKey = JSON.stringify(h.stops);
      this.lut = palette(h.stops);
    }
    for (const { key, payload } of stacks) this.stack(key).take(payload);
    if (exact) this.takeExact(exact);
    // The app's choice applies in full to a new trace (or a fresh view); later, only what changed on its side.
    const changed = this.sync.fromApp(h.sel, PICKED);
    this.s = fresh || !this.s ? { ...h.sel } : { ...this.s, ...changed };
    if (fresh) this.buildPickers();
    this.root.classList.toggle("present", !!h.present);
    this.payloads = (this.payloads ?? 0) + 1;
    Object.assign(this.root.dataset, { payloads: String(this.payloads), t: String(h.T), heldFor: h.heldFor ?? "", received: h.parts.map((p) => p.kind === "stack"
      ? `${p.key}:${stacks.find((x) => x.key === p.key).payload.header.layers.join(".")}` : p.kind).join(" ") });
    this.layout();
    this.ask();
  }

  stack(key) {
    if (!this.stacks.has(key)) this.stacks.set(key, new Layers((layer) => this.arrived(key, layer)));
    return this.stacks.get(key);
  }

  async takeExact(part) {
    const { header: x, chunks } = decode(part.bytes);
    const planes = await inflate(chunks[0]);
    if (planes.length !== x.K * x.K * 4) return;
    const digits = fromPlanes(planes, x.K * x.K);
    this.exact = { key: x.key, K: x.K, digits, plane: { data: digits, offset: 0, scale: 1 / DIGITS } };
    if (x.key === this.exactKey()) this.redraw();
  }

  arrived(key, layer) {
    this.root.dataset.held = this.heldText();
    if (this.needs().some(([k, n]) => k === key && n === layer)) this.redraw();
  }

  // What the view draws now: [measure key, layer] pairs (nothing for a measure the app refused).
  needs() {
    const { view, measure, layer, beside } = this.s;
    if (this.refused[measure]) return [];
    const out = view === "model" ? Array.from({ length: this.L }, (_, n) => [measure, n]) : [[measure, layer]];
    if (view === "head" && beside && measure !== "raw" && !this.refused.raw) out.push(["raw", layer]);
    return out;
  }

  // Of needs(), what the browser neither holds nor is inflating (a measure held for another token counts as lacking).
  missing() {
    if (!this.s) return [];
    return this.needs().filter(([key, layer]) => {
      const lay = this.stacks.get(key);
      const current = lay && lay.id === stackId(this.id, this.meta[key], this.s.query);
      return !current || (!lay.has(layer) && !lay.inflating.has(layer));
    });
  }

  // What the browser holds, for the app: each stack's layers (those inflating too: they are here) and the exact map.
  held() {
    const stacks = {};
    for (const lay of this.stacks.values()) if (lay.id) stacks[lay.id] = [...new Set([...lay.held.keys(), ...lay.inflating])];
    return { id: this.id, nonce: this.nonce, stacks, exact: this.exact ? this.exact.key : null };
  }

  heldText() {
    return [...this.stacks.entries()].map(([k, lay]) => `${k}:${lay.list()}`).join(" ");
  }

  exactKey() {
    return exactKey(this.s, this.meta[this.s.measure]);
  }

  // ---------------------------------------------------------------------------------------------- layout
  buildPickers() {
    this.layerBox.replaceChildren(...picker("Layer", this.L, "layer"));
    const avg = el("button", "ee-btn", "Average");
    avg.dataset.avg = "1";
    this.headBox.replaceChildren(...picker("Head", this.H, "head"), avg);
    this.measureSelect.replaceChildren(...Object.values(this.meta).map((m) => {
      const o = el("option", "", m.label);
      o.value = m.key;
      return o;
    }));
    this.flagBox.querySelector('[data-flag="hide_special"]').textContent = `Hide ${this.specialNames.join(" / ") || "specials"}`;
  }

  keep() {
    return kept(this.T, this.specials, this.s.hide_special);
  }

  widest(font, family) {
    const key = `${font}px ${family}`;
    if (this.widestAt[key] === undefined) this.widestAt[key] = widest(this.labels, key);
    return this.widestAt[key];
  }

  // Sizes from the screen: the one-head figure (one or two maps) or the thumbnails, as wide as there is room and, in
  // presentation mode, as tall as fits down to the bottom of the screen. Only redone when what decides it changes;
  // then, or when `redraw` (a change of the state), the picture is drawn. A resize that moves nothing draws nothing:
  // the component's height changes with the text above the map, and a second paint of 262,144 cells at 512 tokens
  // in the frame after a click doubled its time.
  layout(redraw = true) {
    if (!this.tokens || !this.s) return;
    const present = this.root.classList.contains("present");
    const font = present ? MIN_LABEL_PX : 12;
    const head = this.s.view === "head";
    const pair = head && this.s.beside && this.s.measure !== "raw";
    const K = this.keep().length;
    const beside = besidePanel(present, this.root.clientWidth);
    if (beside !== this.root.classList.contains("beside")) this.root.classList.toggle("beside", beside);
    const width = this.root.clientWidth - (beside ? panelWidth(this.root.clientWidth) + 20 : 0); // beside the panel
    this.fig.hidden = !head;
    this.grid.hidden = head;
    const target = head ? this.fig : this.grid;
    const top = beside ? Math.round(pageTop(target)) : 0; // beside the panel the room below it decides the size
    const geometry = `${this.s.view}|${pair}|${K}|${present}|${beside}|${width}|${this.L}x${this.H}|${top}`;
    if (geometry === this.geometry) return redraw ? this.draw() : undefined;
    this.geometry = geometry;
    const family = getComputedStyle(this.root).fontFamily;
    // Beside the panel the picture takes the screen's height below its top; above it, the controls leave too little
    // (a 160 px map on a 540 px column): there the map takes the column's width, scrolled to as outside presenting.
    const room = beside ? window.innerHeight - pageTop(target) : null;
    // On a projector the whole component stays on screen: the note beside the picture scrolls if it must.
    if (beside) this.root.style.setProperty("--room", `${Math.max(200, window.innerHeight - pageTop(this.root) - 4)}px`);
    else this.root.style.removeProperty("--room");
    Object.assign(this, { font, family, K, pair });
    if (head) this.layoutMaps(font, family, width, room, K, pair);
    else this.layoutThumbs(font, width, room, present);
    this.draw();
  }

  layoutMaps(font, family, width, room, K, pair) {
    const f = mapFrame({ widest: this.widest(font, family), font, width, room, K, maps: pair ? 2 : 1 });
    Object.assign(this, f);
    const { left, side, bottom, right, gap } = f;
    const top = pair ? font * 2 : 0; // the two maps' own titles
    const x = (i) => left + i * (side + gap);
    const mapsW = pair ? 2 * side + gap : side;
    this.top = top;
    this.fig.style.setProperty("--font", `${font}px`);
    Object.assign(this.fig.style, { width: `${left + mapsW + right}px`, height: `${top + side + bottom}px` });
    // Wider than the column (two maps of at least 160 px on a phone): the stage scrolls sideways, as the plotly pairs
    // do. Beside the panel (presenting) the stage's column is as wide as the picture and the panel's takes the rest.
    const wide = left + mapsW + right > width && !this.root.classList.contains("beside");
    if (wide !== this.stage.classList.contains("hm-wide")) this.stage.classList.toggle("hm-wide", wide);
    const first = this.lefts[pair ? 1 : 0];
    if (this.maps[0] !== first) {
      this.maps[0].replaceWith(first);
      this.maps[0] = first;
    }
    // The other layout's canvases get their size now and their backing stores (a first drawing) in idle time.
    const o = mapFrame({ widest: this.widest(font, family), font, width, room, K, maps: pair ? 1 : 2 });
    for (const c of pair ? [this.lefts[0]] : [this.lefts[1], this.maps[1]]) {
      if (fitsCanvas(c, o.side, o.side)) continue;
      fitCanvas(c, o.side, o.side);
      this.hooks.idle(() => { // unless a click has shown and drawn it meanwhile
        if (!c.isConnected || c.hidden) c.getContext("2d").clearRect(0, 0, 1, 1);
      });
    }
    this.maps.forEach((c, i) => {
      const on = i === 0 || pair;
      for (const e of [c, this.xTicks[i], this.xTitles[i], this.mapTitles[i]]) e.hidden = !on;
      if (!on) return;
      if (!fitsCanvas(c, side, side)) fitCanvas(c, side, side); // Hide specials keeps the size: no new, empty canvas
      Object.assign(c.style, { left: `${x(i)}px`, top: `${top}px` });
      Object.assign(this.xTitles[i].style, { left: `${x(i) + side / 2}px`, top: `${top + side + bottom - font * 1.2}px` });
      Object.assign(this.mapTitles[i].style, { left: `${x(i) + side / 2}px`, top: "0px" });
      this.mapTitles[i].hidden = !pair;
    });
    const barX = left + mapsW + 12;
    sizeBar(this.cbar, side);
    Object.assign(this.cbar.style, { left: `${barX}px`, top: `${top}px` });
    Object.assign(this.yTitle.style, { left: "0px", top: `${top + side / 2}px` });
    Object.assign(this.cTitle.style, { left: `${barX + BAR_W + font * 3.2}px`, top: `${top + side / 2}px` });
    this.barX = barX;
    this.ticks();
  }

  // Token labels on every step-th row and column (every one where they fit; mapFrame), as text.
  ticks() {
    const { side, left, step, top, gap } = this;
    const keep = this.keep();
    const K = keep.length;
    const at = (i) => (i + 0.5) * (side / K);
    const ys = [];
    const xs = [[], []];
    for (let i = 0; i < K; i += step) {
      const pos = keep[i];
      const y = el("span", "hm-tick hm-y", this.labels[pos]);
      Object.assign(y.style, { right: `calc(100% - ${left - 4}px)`, top: `${top + at(i)}px` });
      y.title = `${this.tokens[pos]} (${pos})`;
      ys.push(y);
      for (const m of [0, 1]) {
        const x = el("span", `hm-tick hm-x${this.upright ? " hm-up" : ""}`, this.labels[pos]);
        Object.assign(x.style, { right: `calc(100% - ${left + m * (side + gap) + at(i)}px)`, top: `${top + side + 4}px` });
        x.title = y.title;
        xs[m].push(x);
      }
    }
    this.yTicks.replaceChildren(...ys);
    this.xTicks.forEach((box, m) => box.replaceChildren(...(m === 0 || this.pair ? xs[m] : [])));
  }

  layoutThumbs(font, width, room, present) {
    this.stage.classList.remove("hm-wide");
    const per = this.meta[this.s.measure].perHead;
    const f = thumbFrame({ view: this.s.view, width: width - BAR_W - font * 4 - 16, room, L: this.L, H: per ? this.H : 1,
      font, present });
    if (this.s.view === "layer" && !per) Object.assign(f, { cols: 1, rows: 1 });
    this.tf = f;
    this.grid.style.setProperty("--font", `${font}px`);
    fitCanvas(this.thumbCanvas, f.W, f.H);
    f.bar = { x: f.W + 8, y: f.top + (this.s.view === "model" ? 0 : f.label), h: Math.min(f.cell * f.rows, 300) };
    sizeBar(this.thumbBar, f.bar.h);
    Object.assign(this.thumbBar.style, { left: `${f.bar.x}px`, top: `${f.bar.y}px` });
    Object.assign(this.grid.style, { width: `${f.W + BAR_W + font * 4 + 16}px`, height: `${f.H}px` });
    const labels = [];
    const label = (text, x, y, cls) => {
      const e = el("span", `hm-tick ${cls}`, text);
      Object.assign(e.style, { left: `${x}px`, top: `${y}px` });
      labels.push(e);
    };
    for (const [i, [layer, h]] of this.thumbList().entries()) {
      const { x, y } = this.thumbAt(i);
      if (this.s.view === "layer") label(per ? `head ${h}` : `layer ${layer}`, x + f.cell / 2, y - f.label, "hm-thumbtitle");
      else if (layer === 0) label(per ? `H${h}` : "all heads", x + f.cell / 2, 0, "hm-thumbtitle");
      if (this.s.view === "model" && h === 0) label(`L${layer}`, 0, y + f.cell / 2, "hm-rowtitle");
    }
    this.thumbLabels.replaceChildren(...labels);
  }

  // The thumbnails shown, in order: [layer, head] (head 0 for a measure without heads).
  thumbList() {
    const per = this.meta[this.s.measure].perHead;
    const heads = per ? this.H : 1;
    if (this.s.view === "layer") return Array.from({ length: heads }, (_, h) => [this.s.layer, h]);
    return Array.from({ length: this.L * heads }, (_, n) => [Math.floor(n / heads), n % heads]);
  }

  thumbAt(i) {
    const f = this.tf;
    const r = Math.floor(i / f.cols);
    const c = i % f.cols;
    return { x: f.left + c * (f.cell + f.gap), y: f.top + r * f.rowH + (this.s.view === "model" ? 0 : f.label) };
  }

  // ---------------------------------------------------------------------------------------------- drawing
  redraw() {
    if (this.pending) return;
    this.pending = true;
    this.hooks.frame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    if (!this.s) return;
    this.controls();
    const refused = this.refused[this.s.measure];
    this.root.classList.toggle("refused", !!refused);
    if (refused) { // what is drawn is the reason, above the (dimmed) last picture: nothing more is coming
      this.root.classList.remove("loading");
      this.stamp.drawn();
    }
    else if (this.s.view === "head") this.drawMaps();
    else this.drawThumbs();
    setText(this.note, refused ? "" : noteText({ layer: this.s.view === "model" ? null : this.s.layer,
      shares: this.shares, measure: this.s.measure,
      meta: this.meta, specialNames: this.specialNames }));
    const reads = [this.s.view, this.s.measure, this.tokens];
    if (this.refitRead && !reads.every((x, n) => x === this.reads?.[n])) { // the longest readout changed: measured again
      this.reads = reads;
      this.refitRead();
    }
    Object.assign(this.root.dataset, { view: this.s.view, layer: String(this.s.layer), head: String(this.s.head),
      avg: this.s.avg ? "1" : "0", hide: this.s.hide_special ? "1" : "0", scale: this.s.scale, measure: this.s.measure,
      beside: this.s.beside ? "1" : "0", query: String(this.s.query), held: this.heldText() });
  }

  // The toolbar as the state says: marked choices, pickers that do not apply disabled, and why.
  controls() {
    const { s } = this;
    const m = this.meta[s.measure];
    markOn(this.layerBox, "layer", (l) => l === s.layer);
    markOn(this.headBox, "head", (h) => !s.avg && h === s.head);
    markOn(this.headBox, "avg", () => s.avg);
    markOn(this.scaleBox, "scale", (v) => v === s.scale);
    markOn(this.flagBox, "flag", (f) => !!s[f]);
    this.layerBox.hidden = s.view === "model";
    this.headBox.hidden = s.view !== "head";
    for (const b of this.headBox.querySelectorAll("button")) b.disabled = !m.perHead;
    const beside = this.flagBox.querySelector('[data-flag="beside"]');
    beside.disabled = s.view !== "head" || s.measure === "raw";
    beside.title = beside.disabled ? "Choose a measure other than raw attention, in the one-head view" : "Raw attention beside this measure, on one colour scale";
    setText(this.scaleBox.querySelector('[data-scale="fixed"]'), m.rows1 ? SCALE_NAMES.fixed : "0 to largest");
    if (this.measureSelect.value !== s.measure) this.measureSelect.value = s.measure;
    const why = [];
    if (this.refused[s.measure]) why.push(this.refused[s.measure]);
    else if (!m.perHead && s.view === "head") why.push(`${m.label} has no per-head form: one map per layer.`);
    else if (!m.perHead) why.push(`${m.label} has no per-head form: one map per layer, not per head.`);
    if (m.needsToken && !this.refused[s.measure]) {
      why.push(`It is computed for one output token at a time: “${this.tokens[s.query]}” (${s.query}). Click a row to `
        + "compute another (a few seconds).");
    }
    if (this.missing().length && !this.refused[s.measure]) why.push(`Loading ${m.label}…`);
    setText(this.reason, why.join(" "));
  }

  // One map, or raw attention and the measure side by side, each as {key, plane, K, rows, exact, half, top}.
  shownMaps() {
    const { s } = this;
    const keys = this.pair ? ["raw", s.measure] : [s.measure];
    return keys.map((key) => this.mapOf(key));
  }

  mapOf(key) {
    const { s } = this;
    const m = this.meta[key];
    const keep = this.keep();
    const K = keep.length;
    const rows = m.needsToken ? (keep.indexOf(s.query) >= 0 ? [keep.indexOf(s.query)] : []) : null;
    const lay = this.stacks.get(key);
    const current = lay && lay.id === stackId(this.id, m, s.query);
    const fixed = m.rows1 || !current ? 1 : Math.max(1, ...lay.tops);
    if (key === s.measure && this.exact && this.exact.key === this.exactKey() && this.exact.K === K) {
      return { key, plane: this.exact.plane, digits: this.exact.digits, K, rows, exact: true, half: 0, fixed };
    }
    if (!current || !lay.has(s.layer)) return null;
    const plane = this.planeOf(lay, m, s.layer, s.avg ? -1 : s.head, keep);
    return { key, plane, K, rows, exact: false, half: lay.halfStep(s.layer), fixed };
  }

  // A held layer's plane as a map draws it: one head's (head -1: the head mean), cut to the positions shown. The last
  // few cuts are kept, so Hide specials, a colour scale or Beside raw clicked again does not cut again (at 512
  // tokens a cut is 260,100 cells).
  planeOf(lay, m, layer, head, keep) {
    const h = m.perHead ? head : 0;
    const plane = h < 0 ? lay.mean(layer) : lay.plane(layer, h);
    if (keep.length === this.T) return plane;
    const id = `${lay.id}|${layer}|${h}|${keep.length}`;
    if (!this.cuts.has(id)) {
      this.cuts.set(id, cut(plane, this.T, keep, m.rows1));
      if (this.cuts.size > CUTS_KEPT) this.cuts.delete(this.cuts.keys().next().value); // the oldest
    }
    return this.cuts.get(id);
  }

  // After a drawing, in idle time: what the next toggle would draw from the layers held (the head mean, the other
  // side of Hide specials, raw attention for Beside raw), one head's sum or one cut per step, so that click only
  // paints. A newer drawing drops the rest; an input meanwhile waits for one step at most (~1-3 ms at 512 tokens).
  warm() {
    const { s } = this;
    const layer = s.layer;
    const token = (this.warming = {});
    const jobs = [];
    for (const key of new Set([s.measure, "raw"])) {
      const m = this.meta[key];
      const lay = this.stacks.get(key);
      if (!m || !lay || lay.id !== stackId(this.id, m, s.query)) continue;
      for (const [avg, hide] of [[s.avg, !s.hide_special], [!s.avg, s.hide_special], [s.avg, s.hide_special]]) {
        if (m.perHead || !avg) jobs.push({ lay, m, head: avg ? -1 : s.head, keep: kept(this.T, this.specials, hide) });
      }
    }
    const step = (deadline) => {
      if (this.warming !== token) return;
      while (jobs.length && deadline.timeRemaining() > WARM_SLACK_MS) {
        const { lay, m, head, keep } = jobs[0];
        if (lay.has(layer) && head < 0 && !lay.meanStep(layer)) continue; // one more head added to the mean
        if (lay.has(layer)) this.planeOf(lay, m, layer, head, keep);
        jobs.shift();
      }
      if (jobs.length) this.hooks.idle(step);
    };
    this.hooks.idle(step);
  }

  drawMaps() {
    const shown = this.shownMaps();
    const ready = shown.every(Boolean);
    this.root.classList.toggle("loading", !ready);
    setText(this.title, this.caption());
    Object.assign(this.root.dataset, { title: this.title.textContent, exact: "0" });
    if (!ready || !this.side) return; // the last picture stays, dimmed, under the new title
    const top = sharedTop(shown, this.s.scale, Math.max(...shown.map((x) => x.fixed)));
    shown.forEach((x, i) => {
      const src = this.sources[i];
      if (src.width !== x.K || src.height !== x.K) Object.assign(src, { width: x.K, height: x.K });
      const sctx = src.getContext("2d");
      if (this.images[i]?.width !== x.K) this.images[i] = sctx.createImageData(x.K, x.K); // paint() fills every pixel
      const img = this.images[i];
      paint(img.data, x.plane, x.K, { scale: this.s.scale, top, lut: this.lut, rows: x.rows });
      sctx.putImageData(img, 0, 0);
      const ctx = this.maps[i].getContext("2d");
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.imageSmoothingEnabled = false; // one block of pixels per cell: nearest neighbour, never blurred
      ctx.drawImage(src, 0, 0, this.maps[i].width, this.maps[i].height);
      setText(this.mapTitles[i], this.meta[x.key].label);
    });
    this.shown = shown;
    this.colourBar(top);
    this.showRead();
    Object.assign(this.root.dataset, { exact: shown[shown.length - 1].exact ? "1" : "0", title: this.title.textContent,
      step: String(this.step), upright: this.upright ? "1" : "0" });
    this.stamp.drawn();
    this.warm();
    rehearse(this.hooks, this.lut);
  }

  caption() {
    return mapTitle({ s: this.s, m: this.meta[this.s.measure], tokens: this.tokens, H: this.H, train: this.train,
      hidden: this.s.hide_special && this.keep().length < this.T ? this.specialNames : [] });
  }

  barTitle() {
    const m = this.meta[this.s.measure];
    if (this.s.scale === "row") return "÷ row max";
    const unit = this.s.measure === "raw" && !this.pair ? "weight" : m.rows1 ? "share" : "length";
    return this.s.scale === "auto" ? `${unit} (auto)` : unit;
  }

  colourBar(top) {
    drawBar(this.cbar, this.lut);
    barTicks(this.cTicks, top, this.barX + BAR_W + 4, this.top, this.side);
    setText(this.cTitle, this.barTitle());
  }

  valueText(x, cell) {
    if (x.rows && !x.rows.includes(Math.floor(cell / x.K))) return "not computed (one token at a time)";
    return x.exact ? digitText(x.digits[cell]) : weightText(valueAt(x.plane, cell), x.half);
  }

  // "query → key: value" of the hovered cell: exact to 4 decimals once settled, else with the precision it travelled.
  showRead() {
    const shown = this.shown;
    const r = this.read.dataset;
    for (const k of ["q", "k", "weight", "exact"]) delete r[k];
    if (!this.at || !shown || this.s.view !== "head") {
      const coarse = shown && shown.some((x) => !x.exact && x.half >= 5e-5);
      this.read.textContent = coarse ? COARSE_READ : "Hover a cell for its value.";
      return;
    }
    const { q, k } = this.at;
    const keep = this.keep();
    const cell = q * this.K + k;
    const main = shown[shown.length - 1];
    const text = shown.length > 1
      ? shown.map((x) => `${this.meta[x.key].label.toLowerCase()} ${this.valueText(x, cell)}`).join(" · ")
      : this.valueText(main, cell);
    this.read.textContent = pairText(this.tokens, keep[q], keep[k], text);
    Object.assign(r, { q: String(keep[q]), k: String(keep[k]), weight: String(valueAt(main.plane, cell)),
      exact: main.exact ? "1" : "0" });
    if (main.exact) r.digits = digitText(main.digits[cell]);
  }

  // The longest readouts this map can show with its measure (the longest token twice, the widest values, raw
  // attention beside it or not; the note while colours are 8-bit): the room the readout keeps (Hooks.holdHeight), so
  // that no hover pushes the map from under the pointer, and Beside raw does not move it either.
  longestRead() {
    if (!this.tokens || !this.s || this.s.view !== "head") return [];
    const i = longestAt(this.tokens);
    const value = "00.0000 ± 0.0000";
    const m = this.meta[this.s.measure];
    const texts = [m.needsToken ? "not computed (one token at a time)" : value];
    const raw = this.meta.raw.label.toLowerCase();
    if (this.s.measure !== "raw") texts.push(`${raw} ${value} · ${m.label.toLowerCase()} ${value}`);
    return [...texts.map((text) => pairText(this.tokens, i, i, text)), COARSE_READ];
  }

  // Every thumbnail's block means are computed a few at a time after each paint (cached per stack, layer, head and
  // hidden specials), then all are painted at once on one colour scale; when all are cached, at once.
  drawThumbs() {
    const list = this.thumbList();
    const { s } = this;
    const m = this.meta[s.measure];
    const lay = this.stacks.get(s.measure);
    const keep = this.keep();
    const n = Math.min(keep.length, THUMB_CELLS[s.view]);
    const ready = lay && lay.id === stackId(this.id, m, s.query) && list.every(([layer]) => lay.has(layer));
    this.root.classList.toggle("loading", !ready);
    setText(this.title, this.thumbCaption(keep.length, n));
    if (!ready) return;
    const token = (this.drawing = {});
    const means = [];
    const keyOf = (layer, h) => `${lay.id}|${layer}|${h}|${s.hide_special ? 1 : 0}|${n}`;
    const step = () => {
      if (this.drawing !== token) return; // a newer drawing started
      const until = performance.now() + CHUNK_MS;
      while (means.length < list.length && (means.length === 0 || performance.now() < until)) {
        const [layer, h] = list[means.length];
        const key = keyOf(layer, h);
        if (!this.thumbs.has(key)) {
          let plane = lay.plane(layer, h);
          if (keep.length < this.T) plane = cut(plane, this.T, keep, m.rows1);
          this.thumbs.set(key, blockMean(plane, keep.length, n));
        }
        means.push(this.thumbs.get(key));
      }
      if (means.length < list.length) return this.hooks.afterPaint(step);
      this.paintThumbs(list, means, n, m, lay);
    };
    if (list.every(([layer, h]) => this.thumbs.has(keyOf(layer, h)))) step();
    else this.hooks.afterPaint(step);
  }

  paintThumbs(list, means, n, m, lay) {
    const fixed = m.rows1 ? 1 : Math.max(1, ...lay.tops);
    const top = sharedTop(means.map((plane) => ({ plane, K: n, rows: null })), this.s.scale, fixed);
    const f = this.tf;
    const ctx = this.thumbCanvas.getContext("2d");
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, f.W, f.H);
    ctx.imageSmoothingEnabled = false;
    Object.assign(this.scratch, { width: n, height: n });
    const sctx = this.scratch.getContext("2d");
    const img = sctx.createImageData(n, n);
    means.forEach((plane, i) => {
      paint(img.data, plane, n, { scale: this.s.scale, top, lut: this.lut });
      sctx.putImageData(img, 0, 0);
      const { x, y } = this.thumbAt(i);
      ctx.drawImage(this.scratch, x, y, f.cell, f.cell);
    });
    drawBar(this.thumbBar, this.lut);
    barTicks(this.thumbTicks, this.s.scale === "row" ? 1 : top, f.bar.x + BAR_W + 4, f.bar.y, f.bar.h);
    Object.assign(this, { thumbMeans: means, thumbN: n, thumbTop: top });
    this.root.dataset.thumbs = String(list.length);
    this.stamp.drawn();
    rehearse(this.hooks, this.lut);
  }

  thumbCaption(K, n) {
    const { s } = this;
    const m = this.meta[s.measure];
    const name = s.measure === "raw" ? "Attention" : m.label;
    const what = s.view === "model" ? `every layer${m.perHead ? " × head" : ""}` : `layer ${s.layer}${m.perHead ? `, all ${this.H} heads` : ""}`;
    const block = n < K ? ` · each map block-averaged from ${K} to ${n} tokens` : "";
    return `${name}, ${what}${block}`;
  }

  // The picture as on screen, at PNG_SCALE: title, the map(s) with their labels and the colour bar, or the
  // thumbnails with theirs.
  exportPng() {
    const { font, family } = this;
    if (this.s.view !== "head") return this.exportThumbs();
    if (!this.shown) return;
    const { side, left, bottom, step, gap, top } = this;
    const keep = this.keep();
    const K = keep.length;
    const head = font * 4.6;
    const mapsW = this.pair ? 2 * side + gap : side;
    const W = left + mapsW + BAR_W + font * 6 + 24;
    const ctx = exportCanvas(W, head + top + side + bottom);
    ctx.fillStyle = "#212529";
    ctx.font = `bold ${font + 4}px ${family}`;
    ctx.fillText(this.caption(), 8, font * 1.8);
    ctx.font = `${font}px ${family}`;
    ctx.fillText(this.sub.textContent, 8, font * 3.4);
    ctx.font = `${font}px ${family}`;
    ctx.imageSmoothingEnabled = false;
    ctx.textBaseline = "middle";
    this.shown.forEach((x, m) => {
      const x0 = left + m * (side + gap);
      ctx.drawImage(this.sources[m], x0, head + top, side, side);
      if (this.pair) {
        ctx.textAlign = "center";
        ctx.fillText(this.meta[x.key].label, x0 + side / 2, head + font * 0.8);
      }
      for (let i = 0; i < K; i += step) {
        const at = (i + 0.5) * (side / K);
        if (m === 0) {
          ctx.textAlign = "right";
          ctx.fillText(this.labels[keep[i]], left - 4, head + top + at);
        }
        ctx.save();
        ctx.textAlign = "right";
        ctx.translate(x0 + at, head + top + side + 4);
        ctx.rotate(this.upright ? -Math.PI / 2 : -Math.PI / 4);
        ctx.fillText(this.labels[keep[i]], 0, 0);
        ctx.restore();
      }
      ctx.textAlign = "center";
      ctx.fillText("key (attended to)", x0 + side / 2, head + top + side + bottom - font);
    });
    ctx.drawImage(this.cbar, this.barX, head + top, BAR_W, side);
    ctx.textAlign = "left";
    for (const t of this.cTicks.children) ctx.fillText(t.textContent, this.barX + BAR_W + 4, head + parseFloat(t.style.top));
    savePng(ctx.canvas, this.root, `${this.fileName()}.png`);
  }

  exportThumbs() {
    const f = this.tf;
    if (!f || !this.thumbMeans) return;
    const head = this.font * 4.6;
    const ctx = exportCanvas(f.W + BAR_W + this.font * 4 + 24, head + f.H + 8);
    ctx.fillStyle = "#212529";
    ctx.font = `bold ${this.font + 4}px ${this.family}`;
    ctx.fillText(this.title.textContent, 8, this.font * 1.8);
    ctx.font = `${this.font}px ${this.family}`;
    ctx.fillText(this.sub.textContent, 8, this.font * 3.4);
    ctx.drawImage(this.thumbCanvas, 8, head, f.W, f.H);
    ctx.drawImage(this.thumbBar, 8 + f.bar.x, head + f.bar.y, BAR_W, f.bar.h);
    ctx.font = `${this.font}px ${this.family}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (const t of this.thumbLabels.children) ctx.fillText(t.textContent, 8 + parseFloat(t.style.left), head + parseFloat(t.style.top) + this.font * 0.6);
    ctx.textAlign = "left";
    for (const t of this.thumbTicks.children) ctx.fillText(t.textContent, 8 + parseFloat(t.style.left), head + parseFloat(t.style.top));
    savePng(ctx.canvas, this.root, `${this.fileName()}.png`);
  }

  fileName() {
    const { s } = this;
    const m = this.meta[s.measure];
    const what = s.measure === "raw" ? "attention" : s.measure;
    if (s.view === "model") return fileName(this.names, [what, "model-view"]);
    if (s.view === "layer") return fileName(this.names, [what, "all-heads", `L${s.layer}`]);
    const who = !m.perHead ? "all" : s.avg ? "avg" : `H${s.head}`;
    return fileName(this.names, [what, `L${s.layer}`, who, ...(m.needsToken ? [`T${s.query}`] : []),
      ...(this.pair ? ["beside-raw"] : [])]);
  }

  // ---------------------------------------------------------------------------------------------- input
  wire() {
    const h = this.hooks;
    onButton(h, this.layerBox, "layer", (l, e) => this.change(e, { layer: l }));
    onButton(h, this.headBox, "head", (n, e) => this.change(e, { head: n, avg: false }));
    onButton(h, this.headBox, "avg", (_, e) => this.change(e, { avg: !this.s.avg }));
    onButton(h, this.scaleBox, "scale", (v, e) => this.change(e, { scale: v }));
    onButton(h, this.flagBox, "flag", (f, e) => this.change(e, { [f]: !this.s[f] }));
    h.listen(this.measureSelect, "change", (e) => this.change(e, { measure: this.measureSelect.value }));
    h.listen(this.buttons.PNG, "click", () => this.exportPng());
    for (const c of new Set([...this.lefts, ...this.maps])) {
      h.listen(c, "mousemove", (e) => this.hover(e, c));
      h.listen(c, "mouseleave", () => this.hover(null));
      h.listen(c, "click", (e) => this.clickMap(e, c));
    }
    h.listen(this.thumbCanvas, "mousemove", (e) => this.hoverThumb(e));
    h.listen(this.thumbCanvas, "mouseleave", () => this.hoverThumb(null));
    h.listen(this.thumbCanvas, "click", (e) => this.clickThumb(e));
    h.resized(this.root, () => this.layout(false));
    this.refitRead = h.holdHeight(this.read, () => this.longestRead()); // no readout moves a cell from the pointer
  }

  // One change of the state from an input: drawn at once from what is held; what is lacking is asked for now, the
  // rest reaches the app once the clicking stops.
  change(e, diff) {
    if (!this.s || Object.entries(diff).every(([k, v]) => this.s[k] === v)) return;
    this.stamp.input(e.timeStamp);
    Object.assign(this.s, diff);
    this.layout();
    this.stamp.idle();
    if (!this.ask()) this.sync.settle(() => this.pick());
  }

  cellAt(e, canvas, K) {
    const box = canvas.getBoundingClientRect();
    const k = Math.floor(((e.clientX - box.left) / box.width) * K);
    const q = Math.floor(((e.clientY - box.top) / box.height) * K);
    return q >= 0 && q < K && k >= 0 && k < K ? { q, k } : null;
  }

  hover(e, canvas) {
    const at = e ? this.cellAt(e, canvas, this.K) : null;
    if (at && this.at && at.q === this.at.q && at.k === this.at.k) return;
    if (e) this.stamp.input(e.timeStamp);
    this.at = at;
    this.showRead();
    if (e) this.stamp.drawn();
  }

  // A click on a row of attention flow computes flow into that token (the query setting).
  clickMap(e, canvas) {
    const at = this.cellAt(e, canvas, this.K);
    if (!at || !this.meta[this.s.measure].needsToken) return;
    this.change(e, { query: this.keep()[at.q] });
  }

  thumbOf(e) {
    const f = this.tf;
    const box = this.thumbCanvas.getBoundingClientRect();
    const x = e.clientX - box.left;
    const y = e.clientY - box.top;
    for (let i = 0; i < this.thumbList().length; i++) {
      const p = this.thumbAt(i);
      if (x >= p.x && x < p.x + f.cell && y >= p.y && y < p.y + f.cell) {
        const n = this.thumbN;
        return { i, q: Math.min(n - 1, Math.floor(((y - p.y) / f.cell) * n)), k: Math.min(n - 1, Math.floor(((x - p.x) / f.cell) * n)) };
      }
    }
    return null;
  }

  hoverThumb(e) {
    const hit = e && this.thumbMeans ? this.thumbOf(e) : null;
    if (e) this.stamp.input(e.timeStamp);
    if (!hit) {
      this.read.textContent = "Hover a map for its values; click one to open it.";
    } else {
      const [layer, h] = this.thumbList()[hit.i];
      const plane = this.thumbMeans[hit.i];
      const keep = this.keep();
      const b = plane.bounds;
      const v = valueAt(plane, hit.q * this.thumbN + hit.k);
      const who = this.meta[this.s.measure].perHead ? `layer ${layer}, head ${h}` : `layer ${layer}`;
      const span = (i) => (b[i + 1] - b[i] === 1 ? `“${this.tokens[keep[b[i]]]}” (${keep[b[i]]})`
        : `tokens ${keep[b[i]]}–${keep[b[i + 1] - 1]}`);
      const mean = b[hit.q + 1] - b[hit.q] > 1 || b[hit.k + 1] - b[hit.k] > 1 ? " (mean of a block)" : "";
      this.read.textContent = `${who}: ${span(hit.q)} → ${span(hit.k)}: ${v.toFixed(3)}${mean}`;
    }
    if (e) this.stamp.drawn();
  }

  clickThumb(e) {
    const hit = this.thumbOf(e);
    if (!hit) return;
    const [layer, h] = this.thumbList()[hit.i];
    const diff = this.meta[this.s.measure].perHead ? { view: "head", layer, head: h, avg: false } : { view: "head", layer };
    this.stamp.input(e.timeStamp);
    Object.assign(this.s, diff);
    this.layout();
    this.stamp.idle();
    this.sync.now(this.pick(), false); // the page around the map changes with the view: tell the app now
  }

  // ---------------------------------------------------------------------------------------------- sync
  // The view's choice for the app, with what the browser holds.
  pick() {
    return { ...this.s, held: this.held() };
  }

  // Ask the app now for what the view lacks (once per state); true when it asked.
  ask() {
    const lacking = this.missing();
    if (!lacking.length) return false;
    const key = JSON.stringify([this.s, lacking]);
    if (this.asked === key) return true;
    this.asked = key;
    this.sync.now(this.pick(), true);
    this.controls();
    return true;
  }
}

export default (component) => mount(component, AttentionMap);
