// The head view (issue 12): tokens in two columns joined by lines whose opacity is the attention weight. Joined
// after ui/component_base.js (ui/components.py), whose decode() and Layers hold the payload (ui/payload.py), so
// hovering a token, or switching head or layer among the layers shipped, never waits for the server.
// In four parts: layout (sizes from the screen and the tokens), drawing (canvas overview, the focus's lines and
// numbers near the screen, the slide exports), input (events to actions) and sync (the pick back to the app,
// through the base's PickSync).

const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173", "#3182bd", "#e6550d"];
const AVG_COLOUR = "#343a40";
const MIN_W = 0.02; // overview lines lighter than this are not drawn (barely visible at that opacity anyway)
const LONG = 128; // past this many tokens the view takes its long-input layout: tight rows, boxes of fixed width
const MIN_W_LONG = 0.05; // past LONG tokens: thousands of faint lines are a grey blur, and costly to rasterise
const BUCKETS = 32; // overview lines are stroked in 32 opacity groups: one canvas stroke each, not one per line
// The overview is inked in bands: the rows on screen at once, the rest in idle time, half a screen a step. Without a
// GPU the canvas rasterises every stroke across its whole height when the task ends: at 123 tokens a head or layer
// switch spent 7-11 ms there for 2,500 px of canvas, most of it off screen (a 1,000 px band: a third of that).
const INK_STEP = 0.5; // of the screen's height
const KEEP_BYTES = 64e6; // layers fetched one by one (inputs too long to ship whole) stay cached up to this
const FIT_ROW_PX = [19, 33]; // presentation mode: token rows between these heights, so the view fits the screen
// What the lines are (header.sel.lines, ui/measure_lines.py): raw attention unless the app says otherwise.
export const RAW_LINES = { key: "raw", label: "Raw attention", perHead: true, left: "query (from)", right: "key (to)",
  note: "", sums: true };
export const NO_HEADS = "This measure has no per-head form (it measures the layer as a whole), so the head picker is off.";

// ------------------------------------------------------------------------------------------------ layout
// Token rows by length: tighter for long inputs, so 512 tokens stay a scrollable page, not a wall.
export const rowHeight = (T) => (T > LONG ? "1.1em" : T > 64 ? "1.3em" : "1.5em");

// Presentation mode: token rows as tall as fit in `room` px, within FIT_ROW_PX, labels at least MIN_LABEL_PX.
export function fitRows(room, T) {
  const row = Math.max(FIT_ROW_PX[0], Math.min(FIT_ROW_PX[1], Math.floor(room / T)));
  return { row, font: Math.max(MIN_LABEL_PX, Math.min(22, Math.round(row * 0.68))) };
}

// A slide export's frame: rows at least 22 px, token columns as wide as labelWidth(font) (at most 320 px) either
// side of 320-640 px of lines, the title above.
export function slideFrame(rowH, width, T, labelWidth) {
  const row = Math.max(rowH, 22);
  const font = Math.round(row * 0.62);
  const colW = Math.min(320, labelWidth(font) + 16);
  const linesW = Math.max(320, Math.min(640, width));
  const top = font * 3;
  return { row, font, colW, linesW, top, W: colW * 2 + linesW, H: top + row * T + font,
    y: (i) => top + (i + 0.5) * row };
}

export const shortLabel = (t) => (t.length > 24 ? `${t.slice(0, 23)}…` : t);

// The heads whose lines are shown, in order: none for the average, the one head, or the chosen several.
export const shownHeads = (mode, head, heads) => (mode === "avg" ? [] : mode === "one" ? [head]
  : [...heads].sort((a, b) => a - b));

// Several heads as the app's selection writes them ("1,4,7"): the heads of this model in it, ascending.
export const headList = (text, NH) => [...new Set(String(text || "").split(",").map((p) => p.trim())
  .filter((p) => /^\d{1,4}$/.test(p)).map(Number).filter((h) => h < NH))].sort((a, b) => a - b);

export function headsText(mode, head, heads, average, perHead = true) {
  if (!perHead) return "the whole layer";
  return mode === "avg" ? average : mode === "one" ? `head ${head}` : `heads ${shownHeads(mode, head, heads).join(", ")}`;
}

// The lines to draw: one series per head shown (or the head average), each {head, colour, plane}; a measure without
// heads (perHead false) is one series, the layer's; none while the layer is not here. A plane's values are fractions
// of the layer's largest value (header.top; 1 for attention), which is the line's opacity.
export function series(layers, layer, mode, head, heads, perHead = true) {
  if (!layers.has(layer)) return [];
  const top = layers.tops[layer];
  const fraction = (p) => ({ ...p, scale: p.scale / top });
  if (!perHead) return [{ head: "layer", colour: AVG_COLOUR, plane: fraction(layers.plane(layer, 0)) }];
  if (mode === "avg") return [{ head: "avg", colour: AVG_COLOUR, plane: fraction(layers.mean(layer)) }];
  return shownHeads(mode, head, heads).map((h) => ({ head: h, colour: COLOURS[h % COLOURS.length],
    plane: fraction(layers.plane(layer, h)) }));
}

// Every line of a plane of at least minW, as fn(q, k, weight); with a focus {side, i}, that token's lines only (a
// query's line to every key, or every query's line to a key).
export function eachLine(plane, T, focus, minW, fn) {
  const { data, offset, scale } = plane;
  for (let q = 0; q < T; q++) {
    if (focus && focus.side === "q" && q !== focus.i) continue;
    for (let k = 0; k < T; k++) {
      if (focus && focus.side === "k" && k !== focus.i) continue;
      const w = data[offset + q * T + k] * scale;
      if (w >= minW) fn(q, k, w);
    }
  }
}

// ------------------------------------------------------------------------------------------------ drawing
// A px position on the canvas's device pixels: down (or up) to the nearest edge between them.
export const snapDown = (v, dpr) => Math.floor(v * dpr + 1e-6) / dpr;
export const snapUp = (v, dpr) => Math.ceil(v * dpr - 1e-6) / dpr;

// Overview bands: [top, bottom) in CSS px on the canvas's device pixels, so that two bands meet without a seam.
// The parts of [lo, hi) that `done` (sorted, disjoint bands) does not cover.
export function gaps(done, lo, hi) {
  const out = [];
  let at = lo;
  for (const [a, b] of done) {
    if (b <= at) continue;
    if (a >= hi) break;
    if (a > at) out.push([at, a]);
    at = b;
  }
  if (at < hi) out.push([at, hi]);
  return out;
}

// `done` with `band` added, merged where they touch.
export function addBand(done, band) {
  const all = [...done, band].sort((p, q) => p[0] - q[0]);
  const out = [];
  for (const [a, b] of all) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

// The next band to ink in idle time: at most `step` px of the gap nearest to `near` (a px position: the screen's
// middle on the canvas, taken to a device pixel's edge at `dpr`), from its side nearest to `near`; null when the
// canvas is whole.
export function nextBand(done, full, at, step, dpr) {
  const near = snapDown(at, dpr);
  let best = null;
  for (const [a, b] of gaps(done, 0, full)) {
    const d = near < a ? a - near : near > b ? near - b : 0;
    if (!best || d < best.d) best = { a, b, d };
  }
  if (!best) return null;
  const { a, b } = best;
  if (near >= b) return [Math.max(a, b - step), b];
  const from = Math.max(a, Math.min(near, b - step));
  return [from, Math.min(b, from + step)];
}

// Whether the line from y1 to y2 (stroked `width` px wide) may reach into band [a, b).
export const crosses = (y1, y2, band, width) => Math.max(y1, y2) + width + 2 >= band[0]
  && Math.min(y1, y2) - width - 2 < band[1]; // + 2: the antialiased edge, with room to spare

// Stroke every series' lines from x0 to x1 (query q at y(q), key k at y(k)), opacity = weight, in BUCKETS groups;
// with a band, only what falls in it (clipped there, so that what lies outside costs nothing to rasterise).
function strokeLines(ctx, all, T, x0, x1, y, width, focus, minW, band = null) {
  ctx.save();
  ctx.lineWidth = width;
  if (band) {
    ctx.beginPath();
    ctx.rect(x0 - width, band[0], x1 - x0 + 2 * width, band[1] - band[0]);
    ctx.clip();
  }
  for (const s of all) {
    const paths = Array.from({ length: BUCKETS }, () => null);
    eachLine(s.plane, T, focus, minW, (q, k, w) => {
      if (band && !crosses(y(q), y(k), band, width)) return;
      const b = Math.min(BUCKETS - 1, Math.floor(w * BUCKETS));
      const p = paths[b] || (paths[b] = new Path2D());
      p.moveTo(x0, y(q));
      p.lineTo(x1, y(k));
    });
    ctx.strokeStyle = s.colour;
    paths.forEach((p, b) => {
      if (!p) return;
      ctx.globalAlpha = (b + 0.5) / BUCKETS;
      ctx.stroke(p);
    });
  }
  ctx.restore();
}

// A token's numbers (value, colour) in the spans of its box. Spans are made once and then only their text changes
// (blank when unused): adding and removing 512 spans on every hover and leave cost more than the lines themselves.
function numSpan() {
  const span = el("span", "hv-num");
  span.append(document.createTextNode(""));
  return span;
}

function setNums(box, items, digits) {
  while (box.childElementCount < items.length) box.append(numSpan());
  for (let n = 0; n < box.childElementCount; n++) {
    const span = box.children[n];
    const text = n < items.length ? items[n][0].toFixed(digits) : "";
    if (span.firstChild.data !== text) span.firstChild.data = text;
    const colour = n < items.length ? items[n][1] : span.dataset.c;
    if (span.dataset.c !== colour) {
      span.dataset.c = colour;
      span.style.color = colour;
    }
  }
}

class HeadView extends View {
  constructor(parent) {
    super(parent, "hv", () => this.layers.has(this.layer));
    this.root.tabIndex = -1;
    Object.assign(this, { focus: null, pinned: false, hover: null, marked: [], numbers: null, lines: RAW_LINES,
      written: { side: null, rows: new Set() }, // the boxes that hold numbers now: their column and rows
      inked: null, // inked: what the overview on the canvas shows (layer, mode, heads, lines), or null: blank
      inkedBands: [], inkQueued: false, // the rows of it inked so far ([top, bottom) px); more queued for idle time
      rehearsed: false, // whether a first hover was rehearsed (rehearse())
      band: null }); // band: the rows [top, bottom) in px the focus canvas holds, or null: none drawn
    this.root.focusLines = []; // the focus's lines {q, k, head, colour, opacity, weight}, for the tests too
    this.build();
    this.wire();
  }

  build() {
    this.modeBox = el("div", "ee-group");
    for (const [mode, text] of [["one", "One head"], ["several", "Several heads"], ["avg", "Average"]]) {
      const b = el("button", "ee-btn", text);
      b.dataset.mode = mode;
      this.modeBox.append(b);
    }
    const { bar, layerBox, headBox, buttons } = toolbar([this.modeBox], {
      PNG: "Save this picture as a PNG for slides", SVG: "Save this picture as an SVG for slides" });
    Object.assign(this, { layerBox, headBox, buttons });
    this.status = statusLine("hv-status");
    const stage = el("div", "hv-stage");
    this.left = el("div", "hv-col hv-left");
    this.right = el("div", "hv-col hv-right");
    this.mid = el("div", "hv-mid");
    this.canvas = el("canvas", "hv-canvas");
    this.focusCanvas = el("canvas", "hv-focus");
    this.focusCanvas.hidden = true;
    this.mid.append(this.canvas, this.focusCanvas);
    stage.append(this.left, this.mid, this.right);
    this.root.append(bar, this.status, stage);
  }

  // ---------------------------------------------------------------------------------------------- data
  receive(bytes) {
    const payload = decode(bytes);
    const h = payload.header;
    const fresh = this.layers.take(payload);
    // the layers this payload brought (none the view held), and how many payloads came
    Object.assign(this.root.dataset, { received: h.layers.join("."),
      payloads: String(+(this.root.dataset.payloads ?? 0) + 1) });
    if (fresh) {
      this.lines = h.sel.lines || RAW_LINES;
      Object.assign(this, { T: h.T, H: h.H, L: h.L, NH: this.lines.heads || h.H, tokens: h.tokens, name: h.name,
        focus: null, pinned: false });
      this.coarse = payload.levels === 255; // 8-bit weights: within half a step of 1/255
      this.root.classList.toggle("present", !!h.present);
      this.root.toggleAttribute("data-long", h.T > LONG);
      Object.assign(this.root.dataset, { t: String(h.T), shipped: h.layers.length === h.L ? "all" : "some",
        measure: this.lines.key });
      this.root.style.setProperty("--row", rowHeight(h.T));
      this.buildTokens();
      this.buildPickers();
    }
    // The app's choice applies in full to a new trace; later, only what changed on the app's side.
    const changed = this.sync.fromApp(h.sel, ["layer", "head", "avg", "heads", "query"]);
    this.apply(fresh ? h.sel : changed, fresh);
    this.refreshPickers();
    this.layout();
  }

  arrived(layer) {
    this.layers.trim(KEEP_BYTES, this.layer);
    if (layer === this.layer) this.draw();
    else this.refreshPickers();
  }

  // The app's choice: sel holds what changed (all of it for a new trace). The mode follows the app's whole choice
  // whenever its average flag or several heads changed: the average, else the several heads (the URL's "heads", kept
  // for a switch back from the average), else one head.
  apply(sel, first) {
    const app = first ? sel : this.sync.app;
    if ("layer" in sel) this.layer = Math.min(sel.layer, this.L - 1);
    if ("head" in sel) this.head = Math.min(sel.head, this.NH - 1);
    if (first || "avg" in sel || "heads" in sel) {
      const several = headList(app.heads, this.NH);
      this.mode = app.avg ? "avg" : several.length ? "several" : "one";
      this.heads = new Set(several.length ? several : [this.head]);
    }
    if (this.mode === "one") this.heads = new Set([this.head]);
    // A one-token measure (flow) was computed for the pinned query: pin it again when its lines arrive.
    if ((!first || this.lines.note) && "query" in sel && sel.query < this.T) {
      this.focus = { side: "q", i: sel.query };
      this.pinned = true;
    }
  }

  // ---------------------------------------------------------------------------------------------- layout
  buildTokens() {
    const make = (side) => this.tokens.map((tok, i) => {
      const d = el("div", "hv-tok");
      d.dataset.i = String(i);
      d.tabIndex = 0;
      const text = el("span", "hv-text", tok);
      const w = el("span", "hv-w"); // with a blank number ready: the first hover then only writes text
      w.append(numSpan());
      if (side === "q") d.append(w, text);
      else d.append(text, w);
      return d;
    });
    this.leftToks = make("q");
    this.rightToks = make("k");
    this.leftNums = this.leftToks.map((d) => d.querySelector(".hv-w"));
    this.rightNums = this.rightToks.map((d) => d.querySelector(".hv-w"));
    this.left.replaceChildren(el("div", "hv-head", this.lines.left), ...this.leftToks);
    this.right.replaceChildren(el("div", "hv-head", this.lines.right), ...this.rightToks);
    this.marked = [];
    this.numbers = null;
    this.written = { side: null, rows: new Set() };
  }

  buildPickers() {
    this.layerBox.replaceChildren(...picker("Layer", this.L, "layer"));
    this.headBox.replaceChildren(...picker("Head", this.NH, "head", (b, h) => {
      b.classList.add("hv-chip");
      b.style.setProperty("--c", COLOURS[h % COLOURS.length]);
    }));
  }

  refreshPickers() {
    const perHead = this.lines.perHead;
    const shown = new Set(perHead ? shownHeads(this.mode, this.head, this.heads) : []);
    markOn(this.layerBox, "layer", (l) => l === this.layer);
    markOn(this.headBox, "head", (h) => shown.has(h));
    markOn(this.modeBox, "mode", (m) => perHead && m === this.mode);
    for (const b of this.headBox.querySelectorAll("button")) b.disabled = this.mode === "avg" || !perHead;
    for (const b of this.modeBox.querySelectorAll("button")) b.disabled = !perHead;
    this.headBox.title = perHead ? "" : NO_HEADS;
    Object.assign(this.root.dataset, { layer: String(this.layer), mode: this.mode, heads: [...shown].join(","),
      head: String(this.head), several: this.several(),
      focus: this.focus ? `${this.focus.side}${this.focus.i}` : "", pinned: this.pinned ? "1" : "",
      held: this.layers.list() });
  }

  // Presentation mode: token rows as tall as fit between this view's top and the bottom of the screen; longer
  // inputs scroll.
  fit() {
    const style = this.root.style;
    if (!this.root.classList.contains("present")) {
      style.removeProperty("--fit-row");
      style.removeProperty("--fit-font");
      return;
    }
    const head = this.left.firstChild.getBoundingClientRect().height;
    // what the component draws under the token columns (the sentence saying what is shown) stays on screen too
    const below = Math.max(0, this.root.getBoundingClientRect().bottom - this.left.getBoundingClientRect().bottom);
    const { row, font } = fitRows(window.innerHeight - pageTop(this.left) - head - below - 8, this.T);
    style.setProperty("--fit-row", `${row}px`);
    style.setProperty("--fit-font", `${font}px`);
  }

  layout() {
    if (!this.tokens) return;
    this.fit();
    const first = this.leftToks[0];
    this.rowH = first ? first.getBoundingClientRect().height : 20;
    this.top = first ? first.offsetTop - this.left.offsetTop : 0;
    this.width = Math.max(1, this.mid.clientWidth);
    const height = Math.max(1, this.top + this.rowH * this.T);
    fitCanvas(this.canvas, this.width, height); // which also empties it
    Object.assign(this, { inked: null, inkedBands: [] });
    this.band = null;
    this.draw();
  }

  y(i) {
    return this.top + (i + 0.5) * this.rowH;
  }

  lineWidth() {
    return this.root.classList.contains("present") ? 3 : 2;
  }

  // ---------------------------------------------------------------------------------------------- drawing
  draw() {
    const loading = !this.layers.has(this.layer);
    this.root.classList.toggle("loading", loading);
    this.refreshPickers();
    if (loading) {
      this.say(`Loading layer ${this.layer}…`);
      return; // the previous picture stays (dimmed) until the layer arrives: never a blank page
    }
    const midTop = this.mid.getBoundingClientRect().top; // read before anything is written: no second layout
    for (const d of this.marked) d.classList.remove("hv-on");
    this.marked = [];
    const all = this.series();
    this.root.style.setProperty("--nums", String(Math.max(1, all.length))); // the number boxes keep room for this many
    const says = `${this.T}|${this.name}|${all.length}|${this.lines.key}|${this.coarse}`;
    if (says !== this.says && this.refitStatus) { // the longest status line changed: its room is measured again
      this.says = says;
      this.refitStatus();
    }
    this.root.focusLines = [];
    this.numbers = null;
    if (this.focus) this.drawFocus(all);
    this.paintFocus(true, midTop);
    this.writeNums(midTop);
    if (!this.focus) {
      // The overview stays on the canvas while a token has the focus (the canvas is only transparent): leaving the
      // columns shows it again, unless what it shows changed, without stroking thousands of lines at 512 tokens.
      const shows = this.shows();
      if (this.inked !== shows) {
        // A canvas as tall as 512 rows is costly to clear: only when it holds lines.
        if (this.inked) {
          const ctx = this.canvas.getContext("2d");
          ctx.setTransform(1, 0, 0, 1, 0, 0);
          ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
        }
        Object.assign(this, { inked: shows, inkedBands: [] });
        this.inkSeen(all, midTop);
      }
      this.say(this.describe());
    }
    // A blank canvas leaves the page: at 512 tokens it is a layer 9,000 px tall that every frame would hand on. One
    // that holds the overview only turns transparent while a token has the focus: the compositor keeps its picture,
    // so leaving the columns shows it again without handing 9,000 px of it over once more.
    this.canvas.hidden = !this.inked;
    this.canvas.classList.toggle("hv-off", !!this.focus);
    this.stamp.drawn();
    if (!this.rehearsed) this.hooks.idle(() => this.rehearse());
  }

  // The lines of what is chosen now (series()), and a key for them: equal keys, the same lines.
  series() {
    return series(this.layers, this.layer, this.mode, this.head, this.heads, this.lines.perHead);
  }

  shows() {
    return JSON.stringify([this.layer, this.mode, this.head, [...this.heads], this.lines.key]);
  }

  // Whether the overview on the canvas is of what is chosen now, and its layer still here: more of it may be inked.
  inkable() {
    return !!this.inked && this.inked === this.shows() && this.layers.has(this.layer);
  }

  // The overview's lines in `band` (CSS px of the canvas), added to what it holds.
  ink(all, band) {
    const ctx = this.canvas.getContext("2d");
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const minW = this.T > LONG ? MIN_W_LONG : MIN_W;
    strokeLines(ctx, all, this.T, 0, this.width, (i) => this.y(i), this.lineWidth() - 1, null, minW, band);
    this.inkedBands = addBand(this.inkedBands, band);
  }

  // The overview's rows on screen (midTop: where the lines' column starts on it) inked now where they are not yet,
  // the rest of the canvas in idle time. root.dataset.inked: "whole" once every row is.
  inkSeen(all, midTop) {
    const dpr = window.devicePixelRatio || 1;
    const full = this.canvas.height / dpr;
    const seen = [snapDown(Math.max(0, -midTop), dpr), snapUp(Math.min(full, window.innerHeight - midTop), dpr)];
    for (const band of seen[0] < seen[1] ? gaps(this.inkedBands, ...seen) : []) this.ink(all, band);
    this.inkLater();
  }

  inkLater() {
    const dpr = window.devicePixelRatio || 1;
    const whole = gaps(this.inkedBands, 0, this.canvas.height / dpr).length === 0;
    this.root.dataset.inked = whole ? "whole" : "part";
    if (whole || this.inkQueued) return;
    this.inkQueued = true;
    this.hooks.idle(() => {
      this.inkQueued = false;
      if (!this.inkable()) return; // a newer picture is due (the next drawing clears and inks it)
      const screen = window.innerHeight;
      const midTop = this.mid.getBoundingClientRect().top;
      const band = nextBand(this.inkedBands, this.canvas.height / dpr, screen / 2 - midTop,
        snapUp(screen * INK_STEP, dpr), dpr);
      if (band) this.ink(this.series(), band);
      this.inkLater();
    });
  }

  // Once, in idle time after the first drawing: a hover's work done and undone in one task, so no frame shows it.
  // The first hover after opening took 32-48 ms where later ones take 16: its handlers ran for the first time
  // (unoptimised, 4-5 ms against 1), the focus canvas got its context and backing store, and the numbers their
  // first layout. Here the first token of the left column takes the focus, its numbers are laid out (one forced
  // layout), and everything goes back as it was; nothing the page shows or reports changes.
  rehearse() {
    if (this.rehearsed || this.focus || !this.layers.has(this.layer) || this.root.classList.contains("loading")) return;
    this.rehearsed = true;
    const status = this.status.textContent;
    const midTop = this.mid.getBoundingClientRect().top;
    const all = this.series();
    this.focus = { side: "q", i: 0 };
    this.root.focusLines = [];
    this.drawFocus(all);
    this.paintFocus(true, midTop);
    this.writeNums(midTop);
    void this.mid.offsetHeight; // the numbers' layout, once
    for (const d of this.marked) d.classList.remove("hv-on");
    Object.assign(this, { focus: null, marked: [], numbers: null });
    this.root.focusLines = [];
    this.paintFocus(true, midTop);
    this.writeNums(midTop);
    this.say(status);
  }

  // The focus's lines on a canvas as tall as the screen plus half a screen above and below, placed over the rows
  // in sight and drawn again when scrolling leaves that band: at 512 tokens a token's 512 lines are a few strokes,
  // where as elements they cost the browser a style and layout pass each. again: the lines changed; midTop: where
  // the lines' column starts on the screen.
  paintFocus(again, midTop) {
    const c = this.focusCanvas;
    const lines = this.root.focusLines;
    if (!lines.length) {
      c.hidden = true;
      this.band = null;
      return;
    }
    const screen = window.innerHeight;
    const full = this.top + this.rowH * this.T;
    const seen = [Math.max(0, -midTop), Math.min(full, screen - midTop)];
    if (!again && this.band && seen[0] >= this.band[0] && seen[1] <= this.band[1]) return;
    const top = Math.max(0, Math.floor(seen[0] - screen / 2));
    const bottom = Math.min(full, Math.max(top + 1, Math.ceil(seen[1] + screen / 2)));
    this.band = [top, bottom];
    const dpr = fitCanvas(c, this.width, bottom - top); // which also empties it
    c.style.top = `${top}px`;
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, -top * dpr);
    ctx.lineWidth = this.lineWidth() + 1;
    for (const l of lines) {
      const [y1, y2] = [this.y(l.q), this.y(l.k)];
      if (Math.max(y1, y2) < top || Math.min(y1, y2) > bottom) continue;
      ctx.globalAlpha = l.opacity;
      ctx.strokeStyle = l.colour;
      ctx.beginPath();
      ctx.moveTo(0, y1);
      ctx.lineTo(this.width, y2);
      ctx.stroke();
    }
    c.hidden = false;
  }

  // The numbers beside the other column, in the rows on screen and half a screen above and below: a hover writes
  // 512 numbers in no more boxes than that, where every box changed cost the browser a layout of 2,000 objects.
  // Boxes that held numbers and no longer should (another token, another column, scrolled away) are emptied;
  // scrolling writes the rows it brings near.
  writeNums(midTop) {
    const n = this.numbers;
    const had = this.written;
    const boxes = (side) => (side === "q" ? this.leftNums : this.rightNums);
    const want = new Set();
    if (n) {
      const screen = window.innerHeight;
      const row = (px) => Math.floor((px - this.top) / this.rowH);
      const lo = Math.max(0, row(-midTop - screen / 2));
      const hi = Math.min(this.T - 1, row(screen - midTop + screen / 2));
      for (let j = lo; j <= hi; j++) want.add(j);
    }
    for (const j of had.rows) {
      if (n && had.side === n.side && want.has(j)) continue;
      setNums(boxes(had.side)[j], [], 0);
      had.rows.delete(j);
    }
    if (!n) return;
    had.side = n.side;
    for (const j of want) {
      setNums(boxes(n.side)[j], n.labels[j], n.digits);
      had.rows.add(j);
    }
  }

  // One token's lines (each with its weight, for the status line and the tests), weights beside the other column.
  drawFocus(all) {
    const { side, i } = this.focus;
    const mine = side === "q" ? this.leftToks : this.rightToks;
    mine[i].classList.add("hv-on");
    this.marked.push(mine[i]);
    const labels = Array.from({ length: this.T }, () => []);
    const unit = this.layers.tops[this.layer]; // a line's opacity is its value as a fraction of this
    const lines = this.root.focusLines;
    for (const s of all) {
      eachLine(s.plane, this.T, this.focus, 0, (q, k, w) => {
        lines.push({ q, k, head: String(s.head), colour: s.colour, opacity: w, weight: w * unit });
        labels[side === "q" ? k : q].push([w * unit, s.colour]);
      });
    }
    this.numbers = { side: side === "q" ? "k" : "q", labels, digits: this.coarse ? 2 : 3 };
    if (this.hover !== null && this.pinned) {
      const j = this.hover;
      const [q, k] = side === "q" ? [i, j] : [j, i];
      this.say(this.pairStatus(q, k, all, labels[j].map(([w]) => w)));
    } else {
      this.say(this.focusStatus(side, i, this.pinned));
    }
  }

  // A focused token's status line: what its lines and the numbers beside the other column are.
  focusStatus(side, i, pinned) {
    const who = `“${this.tokens[i]}” (${i})`;
    const note = pinned ? " (pinned: click again to release)" : "";
    if (this.lines.key !== "raw") {
      return side === "q" ? `${who} takes from each token the share beside it (${this.lines.label})${note}.`
        + this.precision() : `Every position's value on ${who} (${this.lines.label})${note}.${this.precision()}`;
    }
    return side === "q" ? `${who} attends to each key with the weight beside it${note}.${this.precision()}`
      : `Every query's weight on ${who}${note}.${this.precision()}`;
  }

  // The pinned token's pair with the hovered one: every series' weight of it.
  pairStatus(q, k, all, weights) {
    const half = this.layers.halfStep(this.layer);
    const who = (n) => (all[n].head === "avg" ? "average" : all[n].head === "layer" ? this.lines.label
      : `head ${all[n].head}`);
    return pairText(this.tokens, q, k, weights.map((w, n) => `${who(n)} ${weightText(w, half)}`).join(", "));
  }

  // The longest status lines the view can show now (the longest token, pinned; every series' weight): the room its
  // line keeps (Hooks.holdHeight), so that no hover's text pushes the rows down from under the pointer.
  longestStatus() {
    if (!this.tokens || !this.layers.has(this.layer)) return [];
    const i = longestAt(this.tokens);
    const all = this.series();
    return [this.focusStatus("q", i, true), this.focusStatus("k", i, true),
      this.pairStatus(i, i, all, all.map(() => 0.5))];
  }

  precision() {
    if (!this.coarse) return "";
    if (this.lines.key === "raw") return " Weights here are 8-bit: each within ± 0.002 of the model's.";
    return ` Values here are 8-bit: each within ± ${+this.layers.halfStep(this.layer).toPrecision(1)} of the measure's.`;
  }

  describe() {
    const l = this.lines;
    const what = headsText(this.mode, this.head, this.heads, `average of ${this.NH} heads`, l.perHead);
    if (l.key === "raw") {
      return `Layer ${this.layer}, ${what}. Line opacity is the attention weight. Hover or click a token to isolate `
        + `its lines.${this.precision()}`;
    }
    const top = this.layers.tops[this.layer];
    const scale = l.sums ? ", rows sum to 1" : ` (opacity: ÷ ${top.toFixed(2)}, the layer's largest)`;
    return `Layer ${this.layer}, ${what}: ${l.label}${scale}${l.note ? `, ${l.note}` : ""}.`
      + this.precision(); // a measure without heads says so in the head picker's title and in the page's caption
  }

  say(text) {
    this.status.textContent = text;
  }

  // The slide exports: title, both token columns and the lines as on screen (the focus's only, if any).
  slide(labelWidth) {
    const tokens = this.tokens.map(shortLabel);
    const frame = slideFrame(this.rowH, this.width, this.T, (font) => labelWidth(tokens, font));
    const l = this.lines;
    const title = `Layer ${this.layer}, ${headsText(this.mode, this.head, this.heads, "average of heads", l.perHead)}`
      + (l.key === "raw" ? "" : `: ${l.label}`);
    return { ...frame, tokens, title, all: this.series() };
  }

  exportPng() {
    const family = "Helvetica, Arial, sans-serif";
    const f = this.slide((tokens, font) => widest(tokens, `${font}px ${family}`));
    const ctx = exportCanvas(f.W, f.H);
    ctx.fillStyle = "#212529";
    ctx.font = `bold ${f.font + 4}px ${family}`;
    ctx.fillText(f.title, 8, f.font * 1.6);
    ctx.font = `${f.font}px ${family}`;
    ctx.textBaseline = "middle";
    f.tokens.forEach((t, i) => {
      ctx.textAlign = "right";
      ctx.fillText(t, f.colW - 8, f.y(i));
      ctx.textAlign = "left";
      ctx.fillText(t, f.colW + f.linesW + 8, f.y(i));
    });
    strokeLines(ctx, f.all, this.T, f.colW, f.colW + f.linesW, f.y, this.lineWidth(), this.focus, MIN_W);
    savePng(ctx.canvas, this.root, `${this.name}.png`);
  }

  exportSvg() {
    const f = this.slide((tokens, font) => Math.max(...tokens.map((t) => t.length)) * font * 0.62);
    const svg = svgEl("svg", { xmlns: SVG_NS, width: f.W, height: f.H, "font-family": "Helvetica, Arial, sans-serif",
      "font-size": f.font });
    svg.append(svgEl("rect", { width: f.W, height: f.H, fill: "#fff" }));
    const text = (s, x, y, anchor, extra = {}) => svg.append(svgEl("text", { x, y, "text-anchor": anchor,
      "dominant-baseline": "middle", ...extra }, s));
    text(f.title, 8, f.font * 1.4, "start", { "font-weight": "bold", "font-size": f.font + 4 });
    f.tokens.forEach((t, i) => {
      text(t, f.colW - 8, f.y(i), "end");
      text(t, f.colW + f.linesW + 8, f.y(i), "start");
    });
    for (const s of f.all) {
      eachLine(s.plane, this.T, this.focus, MIN_W, (q, k, w) => svg.append(svgEl("line", { x1: f.colW, y1: f.y(q),
        x2: f.colW + f.linesW, y2: f.y(k), stroke: s.colour, "stroke-opacity": w.toFixed(3),
        "stroke-width": this.lineWidth() })));
    }
    saveSvg(svg, this.root, `${this.name}.svg`);
  }

  // ---------------------------------------------------------------------------------------------- input
  wire() {
    const h = this.hooks;
    onButton(h, this.layerBox, "layer", (l, e) => this.input(e, () => this.setLayer(l)));
    onButton(h, this.headBox, "head", (n, e) => this.input(e, () => this.toggleHead(n)));
    onButton(h, this.modeBox, "mode", (m, e) => this.input(e, () => this.setMode(m)));
    h.listen(this.buttons.PNG, "click", () => this.exportPng());
    h.listen(this.buttons.SVG, "click", () => this.exportSvg());
    for (const [col, side] of [[this.left, "q"], [this.right, "k"]]) {
      const tok = (e) => e.target.closest(".hv-tok");
      h.listen(col, "mouseover", (e) => tok(e) && this.input(e, () => this.enter(side, +tok(e).dataset.i)));
      h.listen(col, "mouseleave", (e) => this.input(e, () => this.leave()));
      h.listen(col, "click", (e) => tok(e) && this.input(e, () => this.pin(side, +tok(e).dataset.i)));
      h.listen(col, "keydown", (e) => {
        if (!tok(e) || (e.key !== "Enter" && e.key !== " ")) return;
        e.preventDefault();
        this.input(e, () => this.pin(side, +tok(e).dataset.i));
      });
    }
    h.resized(this.mid, () => this.layout());
    this.refitStatus = h.holdHeight(this.status, () => this.longestStatus()); // rows stay put whatever a hover says
    // Scrolling (the page's, wherever it scrolls) may bring rows past the focus canvas's band into sight.
    // So may it bring rows of the overview that idle time has not inked yet.
    let queued = false;
    h.listen(document, "scroll", () => {
      if (queued || (!this.numbers && this.root.dataset.inked !== "part")) return;
      queued = true;
      h.frame(() => {
        queued = false;
        const top = this.mid.getBoundingClientRect().top;
        if (this.numbers) {
          this.paintFocus(false, top);
          this.writeNums(top);
        }
        if (this.inkable()) this.inkSeen(this.series(), top);
      });
    }, { capture: true, passive: true });
  }

  input(event, action) {
    this.stamp.input(event.timeStamp);
    action();
    this.stamp.idle(); // nothing was drawn, if draw() did not take the input's time
  }

  enter(side, i) {
    if (this.pinned) {
      const next = side !== this.focus.side ? i : null;
      if (next === this.hover) return;
      this.hover = next;
    } else {
      if (this.focus && this.focus.side === side && this.focus.i === i) return;
      this.focus = { side, i };
    }
    this.draw();
  }

  leave() {
    if (this.pinned) {
      if (this.hover === null) return;
      this.hover = null;
    } else {
      if (!this.focus) return;
      this.focus = null;
    }
    this.draw();
  }

  pin(side, i) {
    if (this.pinned && this.focus.side === side && this.focus.i === i) {
      this.pinned = false;
    } else {
      this.focus = { side, i };
      this.pinned = true;
      if (side === "q") this.settle();
    }
    this.hover = null;
    this.draw();
  }

  setLayer(l) {
    if (l === this.layer) return;
    this.layer = l;
    this.draw();
    if (!this.layers.has(l)) this.sync.now(this.pick(), true); // a layer not shipped: ask the app now (a fragment run)
    this.settle(); // and the settled choice once the clicking stops, for the rest of the page
  }

  toggleHead(h) {
    if (this.mode === "avg" || !this.lines.perHead) return;
    if (this.mode === "one") this.head = h;
    else if (this.heads.has(h) && this.heads.size > 1) {
      this.heads.delete(h);
      if (this.head === h) this.head = Math.min(...this.heads); // the head the app follows is one shown
    } else {
      this.heads.add(h);
      this.head = h;
    }
    if (this.mode === "one") this.heads = new Set([h]);
    this.draw();
    this.settle();
  }

  setMode(mode) {
    if (mode === this.mode || !this.lines.perHead) return;
    if (mode === "several" && this.mode === "one") this.heads = new Set([this.head]);
    this.mode = mode;
    this.draw();
    this.settle();
  }

  // ---------------------------------------------------------------------------------------------- sync
  // The view's choice for the app: layer, head, head average, several heads ("" unless that mode; the head is one of
  // them), and the pinned query token if there is one; and the layers it holds.
  pick() {
    const pick = { layer: this.layer, head: this.head, avg: this.mode === "avg", heads: this.several(),
      held: { id: this.layers.id, layers: [...this.layers.held.keys()] } }; // what the app need not send again
    if (this.focus && this.focus.side === "q" && this.pinned) pick.query = this.focus.i;
    return pick;
  }

  // Several heads as the URL keeps them ("1,4,7"), or "" in the other modes.
  several() {
    return this.mode === "several" ? shownHeads(this.mode, this.head, this.heads).join(",") : "";
  }

  settle() {
    this.sync.settle(() => this.pick());
  }
}

export default (component) => mount(component, HeadView);
