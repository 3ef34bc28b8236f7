// The head view (issue 12): tokens in two columns joined by lines whose opacity is the attention weight.
// Everything is drawn here from one binary payload (ui/headview.py: a JSON header, then uint16 weights, or past 128
// tokens 8-bit weights deflated layer by layer), so hovering a token, or switching head or layer among the layers
// shipped, never waits for the server. User text reaches the
// DOM only through textContent (or canvas fillText / XMLSerializer for the exports): never as markup.

const STATES = new WeakMap(); // parentElement -> view; Streamlit calls the default export again on every rerun
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173", "#3182bd", "#e6550d"];
const AVG_COLOUR = "#343a40";
const SYNC_MS = 1000; // the choice goes back to the app once the clicking stops: browsing heads costs no rerun
const MIN_W = 0.02; // overview lines lighter than this are not drawn (barely visible at that opacity anyway)
const MIN_W_LONG = 0.05; // past 128 tokens: thousands of faint lines are a grey blur, and costly to rasterise
const BUCKETS = 32; // overview lines are stroked in 32 opacity groups: one canvas stroke each, not one per line
const KEEP_BYTES = 64e6; // layers fetched one by one (inputs too long to ship whole) stay cached up to this
const SVG_NS = "http://www.w3.org/2000/svg";
const FIT_ROW_PX = [20, 33]; // presentation mode: token rows between these heights, so the view fits the screen
const MIN_LABEL_PX = 14; // ... and token labels no smaller than this (the back row of a lecture hall)

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function decode(bytes) {
  // [uint32 LE header length][header JSON][zero padding to a multiple of 8][body]; the body is the layers' uint16 LE
  // weights one after another, or (header.zipped: their sizes) each layer's uint8 weights deflated on its own.
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n)));
  const start = Math.ceil((4 + n) / 8) * 8;
  if (header.zipped) {
    let at = start;
    const chunks = header.zipped.map((size) => bytes.subarray(at, (at += size)));
    return { header, chunks };
  }
  const copy = bytes.slice(start); // a fresh, aligned buffer
  return { header, weights: new Uint16Array(copy.buffer, 0, copy.byteLength >> 1) };
}

async function inflate(chunk) {
  const stream = new Blob([chunk]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

class HeadView {
  constructor(parent) {
    this.root = el("div", "hv");
    this.root.tabIndex = -1;
    parent.appendChild(this.root);
    this.layers = new Map(); // layer -> Uint16Array or Uint8Array (H * T * T), steps of 1 / this.levels
    this.avgs = new Map(); // layer -> Float32Array (T * T)
    this.id = null;
    this.focus = null; // {side: "q" | "k", i}
    this.pinned = false;
    this.hover = null; // token index under the pointer on the other side of a pinned focus
    this.timer = null;
    this.sent = null; // the last choice sent to the app
    this.serverSel = null;
    this.draws = 0;
    this.send = () => {};
    this.build();
  }

  build() {
    const bar = el("div", "hv-bar");
    this.layerBox = el("div", "hv-group");
    this.headBox = el("div", "hv-group");
    this.modeBox = el("div", "hv-group hv-modes");
    for (const [mode, text] of [["one", "One head"], ["several", "Several heads"], ["avg", "Average"]]) {
      const b = el("button", "hv-btn", text);
      b.dataset.mode = mode;
      this.modeBox.append(b);
    }
    const exports = el("div", "hv-group");
    this.pngBtn = el("button", "hv-btn", "PNG");
    this.svgBtn = el("button", "hv-btn", "SVG");
    this.pngBtn.title = "Save this picture as a PNG for slides";
    this.svgBtn.title = "Save this picture as an SVG for slides";
    exports.append(el("span", "hv-label", "Export"), this.pngBtn, this.svgBtn);
    bar.append(this.layerBox, this.headBox, this.modeBox, exports);
    this.status = el("div", "hv-status");
    this.status.setAttribute("aria-live", "polite");
    this.stage = el("div", "hv-stage");
    this.left = el("div", "hv-col hv-left");
    this.right = el("div", "hv-col hv-right");
    this.mid = el("div", "hv-mid");
    this.canvas = el("canvas", "hv-canvas");
    this.svg = document.createElementNS(SVG_NS, "svg");
    this.svg.setAttribute("class", "hv-svg");
    this.mid.append(this.canvas, this.svg);
    this.stage.append(this.left, this.mid, this.right);
    this.root.append(bar, this.status, this.stage);

    this.layerBox.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-layer]");
      if (b) this.input(e, () => this.setLayer(+b.dataset.layer));
    });
    this.headBox.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-head]");
      if (b) this.input(e, () => this.toggleHead(+b.dataset.head));
    });
    this.modeBox.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-mode]");
      if (b) this.input(e, () => this.setMode(b.dataset.mode));
    });
    this.pngBtn.addEventListener("click", () => this.exportPng());
    this.svgBtn.addEventListener("click", () => this.exportSvg());
    for (const [col, side] of [[this.left, "q"], [this.right, "k"]]) {
      col.addEventListener("mouseover", (e) => {
        const t = e.target.closest(".hv-tok");
        if (t) this.input(e, () => this.enter(side, +t.dataset.i));
      });
      col.addEventListener("mouseleave", (e) => this.input(e, () => this.leave()));
      col.addEventListener("click", (e) => {
        const t = e.target.closest(".hv-tok");
        if (t) this.input(e, () => this.pin(side, +t.dataset.i));
      });
      col.addEventListener("keydown", (e) => {
        const t = e.target.closest(".hv-tok");
        if (t && (e.key === "Enter" || e.key === " ")) {
          e.preventDefault();
          this.input(e, () => this.pin(side, +t.dataset.i));
        }
      });
    }
    new ResizeObserver(() => this.layout()).observe(this.mid);
    window.addEventListener("resize", () => this.layout());
  }

  // ------------------------------------------------------------------------------------------------ data
  receive(bytes) {
    const { header, weights, chunks } = decode(bytes);
    const h = header;
    const fresh = h.id !== this.id;
    if (fresh) {
      this.id = h.id;
      this.layers.clear();
      this.avgs.clear();
      this.inflating = new Set();
      Object.assign(this, { T: h.T, H: h.H, L: h.L, tokens: h.tokens, name: h.name, sentence: h.sentence });
      this.levels = h.bits === 8 ? 255 : 65535;
      this.all = h.layers.length === h.L;
      this.focus = null;
      this.pinned = false;
      this.root.classList.toggle("present", !!h.present);
      this.root.dataset.t = String(h.T);
      this.root.style.setProperty("--row", h.T > 128 ? "1.1em" : h.T > 64 ? "1.3em" : "1.5em");
      this.root.dataset.shipped = this.all ? "all" : "some";
      this.buildTokens();
      this.buildPickers();
    }
    const size = this.H * this.T * this.T;
    if (weights) h.layers.forEach((layer, n) => this.layers.set(layer, weights.subarray(n * size, (n + 1) * size)));
    else {
      // Deflated layers: inflated off the main thread, drawn as each arrives; ones already here are skipped.
      const id = h.id;
      h.layers.forEach((layer, n) => {
        if (this.layers.has(layer) || this.inflating.has(layer)) return;
        this.inflating.add(layer);
        inflate(chunks[n]).then((w) => {
          if (this.id !== id) return;
          this.inflating.delete(layer);
          if (w.length !== size) return;
          this.layers.set(layer, w);
          this.trim();
          if (layer === this.layer) this.draw();
          else this.refreshPickers();
        });
      });
    }
    // The app's choice applies in full to a new payload; later, only what changed on the app's side (the URL,
    // another widget), never an echo of what this view sent, and never while a choice of the user's is pending.
    const prev = this.serverSel;
    if (fresh) this.apply(h.sel, true);
    else if (prev && this.timer === null) {
      const changed = {};
      for (const k of ["layer", "head", "avg", "query"]) {
        if (h.sel[k] !== prev[k] && !(this.sent && this.sent[k] === h.sel[k])) changed[k] = h.sel[k];
      }
      if (Object.keys(changed).length) this.apply(changed, false);
    }
    this.serverSel = h.sel;
    this.refreshPickers();
    this.layout();
  }

  trim() {
    // Layers fetched one at a time: the oldest go once they pass KEEP_BYTES (never the one on screen).
    let bytes = 0;
    for (const w of this.layers.values()) bytes += w.byteLength;
    for (const [layer, w] of this.layers) {
      if (bytes <= KEEP_BYTES) break;
      if (layer === this.layer) continue;
      this.layers.delete(layer);
      this.avgs.delete(layer);
      bytes -= w.byteLength;
    }
  }

  apply(sel, first) {
    if (first) {
      this.mode = sel.avg ? "avg" : "one";
      this.heads = new Set();
    }
    if ("layer" in sel) this.layer = Math.min(sel.layer, this.L - 1);
    if ("head" in sel) {
      this.head = Math.min(sel.head, this.H - 1);
      if (this.mode === "several") this.heads.add(this.head);
      else this.heads = new Set([this.head]);
    }
    if (!first && "avg" in sel) this.mode = sel.avg ? "avg" : this.mode === "avg" ? "one" : this.mode;
    if (!first && "query" in sel && sel.query < this.T) {
      this.focus = { side: "q", i: sel.query };
      this.pinned = true;
    }
  }

  weightsOf(layer) {
    return this.layers.get(layer);
  }

  avgOf(layer) {
    let a = this.avgs.get(layer);
    if (a) return a;
    const w = this.layers.get(layer);
    const n = this.T * this.T;
    a = new Float32Array(n);
    for (let h = 0; h < this.H; h++) for (let x = 0; x < n; x++) a[x] += w[h * n + x];
    const s = 1 / (this.levels * this.H);
    for (let x = 0; x < n; x++) a[x] *= s;
    this.avgs.set(layer, a);
    return a;
  }

  // The lines to draw: one series per head shown (or the head average), each {head, colour, data, offset, scale}.
  series() {
    const w = this.weightsOf(this.layer);
    if (!w) return [];
    if (this.mode === "avg") return [{ head: "avg", colour: AVG_COLOUR, data: this.avgOf(this.layer), offset: 0, scale: 1 }];
    const n = this.T * this.T;
    const heads = this.mode === "one" ? [this.head] : [...this.heads].sort((a, b) => a - b);
    return heads.map((h) => ({ head: h, colour: COLOURS[h % COLOURS.length], data: w, offset: h * n, scale: 1 / this.levels }));
  }

  // ------------------------------------------------------------------------------------------------ DOM
  buildTokens() {
    const make = (side) => {
      const frag = document.createDocumentFragment();
      this.tokens.forEach((tok, i) => {
        const d = el("div", "hv-tok");
        d.dataset.i = String(i);
        d.tabIndex = 0;
        const text = el("span", "hv-text", tok); // textContent: a token is never markup
        const w = el("span", "hv-w");
        if (side === "q") d.append(w, text);
        else d.append(text, w);
        frag.append(d);
      });
      return frag;
    };
    this.left.replaceChildren(el("div", "hv-head", "query (from)"), make("q"));
    this.right.replaceChildren(el("div", "hv-head", "key (to)"), make("k"));
    this.marked = [];
    this.labelled = [];
    this.leftToks = [...this.left.querySelectorAll(".hv-tok")];
    this.rightToks = [...this.right.querySelectorAll(".hv-tok")];
  }

  buildPickers() {
    const layers = [el("span", "hv-label", "Layer")];
    for (let l = 0; l < this.L; l++) {
      const b = el("button", "hv-btn", String(l));
      b.dataset.layer = String(l);
      layers.push(b);
    }
    this.layerBox.replaceChildren(...layers);
    const heads = [el("span", "hv-label", "Head")];
    for (let h = 0; h < this.H; h++) {
      const b = el("button", "hv-btn hv-chip", String(h));
      b.dataset.head = String(h);
      b.style.setProperty("--c", COLOURS[h % COLOURS.length]);
      heads.push(b);
    }
    this.headBox.replaceChildren(...heads);
  }

  refreshPickers() {
    for (const b of this.layerBox.querySelectorAll("button")) b.classList.toggle("on", +b.dataset.layer === this.layer);
    const shown = this.mode === "avg" ? new Set() : this.mode === "one" ? new Set([this.head]) : this.heads;
    for (const b of this.headBox.querySelectorAll("button")) {
      b.classList.toggle("on", shown.has(+b.dataset.head));
      b.disabled = this.mode === "avg";
    }
    for (const b of this.modeBox.querySelectorAll("button")) b.classList.toggle("on", b.dataset.mode === this.mode);
    const r = this.root.dataset;
    r.layer = String(this.layer);
    r.mode = this.mode;
    r.heads = [...shown].sort((a, b) => a - b).join(",");
    r.focus = this.focus ? `${this.focus.side}${this.focus.i}` : "";
    r.pinned = this.pinned ? "1" : "";
    r.held = [...this.layers.keys()].sort((a, b) => a - b).join(","); // the layers in the browser
  }

  // Presentation mode: token rows as tall as fit between this view's top and the bottom of the screen (a scroll
  // of the page undone), within FIT_ROW_PX, with labels of at least MIN_LABEL_PX; longer inputs scroll.
  fit() {
    const style = this.root.style;
    if (!this.root.classList.contains("present")) {
      style.removeProperty("--fit-row");
      style.removeProperty("--fit-font");
      return;
    }
    const scroller = document.querySelector('[data-testid="stMain"]'); // Streamlit's scrolling main column
    const top = this.left.getBoundingClientRect().top + (scroller ? scroller.scrollTop : window.scrollY);
    const head = this.left.firstChild.getBoundingClientRect().height;
    const room = window.innerHeight - top - head - 12;
    const row = Math.max(FIT_ROW_PX[0], Math.min(FIT_ROW_PX[1], Math.floor(room / this.T)));
    style.setProperty("--fit-row", `${row}px`);
    style.setProperty("--fit-font", `${Math.max(MIN_LABEL_PX, Math.min(22, Math.round(row * 0.68)))}px`);
  }

  layout() {
    if (!this.tokens) return;
    this.fit();
    const first = this.leftToks[0];
    this.rowH = first ? first.getBoundingClientRect().height : 20;
    this.top = first ? first.offsetTop - this.left.offsetTop : 0;
    this.width = Math.max(1, this.mid.clientWidth);
    const height = Math.max(1, this.top + this.rowH * this.T);
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * dpr);
    this.canvas.height = Math.round(height * dpr);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${height}px`;
    this.svg.setAttribute("width", String(this.width));
    this.svg.setAttribute("height", String(height));
    this.svg.setAttribute("viewBox", `0 0 ${this.width} ${height}`);
    this.draw();
  }

  y(i) {
    return this.top + (i + 0.5) * this.rowH;
  }

  // ------------------------------------------------------------------------------------------------ drawing
  draw() {
    const loading = !this.weightsOf(this.layer);
    this.root.classList.toggle("loading", loading);
    this.refreshPickers();
    if (loading) {
      this.say(`Loading layer ${this.layer}…`);
      return; // the previous picture stays (dimmed) until the layer arrives: never a blank page
    }
    const ctx = this.canvas.getContext("2d");
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.width, this.canvas.height / dpr);
    this.svg.replaceChildren();
    for (const d of this.marked) d.classList.remove("hv-on");
    for (const box of this.labelled) box.replaceChildren();
    this.marked = [];
    this.labelled = [];
    const series = this.series();
    if (this.focus) this.drawFocus(series);
    else {
      lines(ctx, series, this.T, 0, this.width, (i) => this.y(i), this.lineWidth() - 1, null, this.T > 128 ? MIN_W_LONG : MIN_W);
      this.say(this.describe());
    }
    this.stamp();
  }

  lineWidth() {
    return this.root.classList.contains("present") ? 3 : 2;
  }

  drawFocus(series) {
    const { side, i } = this.focus;
    const T = this.T;
    const mine = side === "q" ? this.leftToks : this.rightToks;
    const theirs = side === "q" ? this.rightToks : this.leftToks;
    mine[i].classList.add("hv-on");
    this.marked.push(mine[i]);
    const frag = document.createDocumentFragment();
    const width = this.lineWidth();
    const labels = Array.from({ length: T }, () => []);
    for (const s of series) {
      for (let j = 0; j < T; j++) {
        const [q, k] = side === "q" ? [i, j] : [j, i];
        const w = s.data[s.offset + q * T + k] * s.scale;
        const line = document.createElementNS(SVG_NS, "line");
        line.setAttribute("x1", "0");
        line.setAttribute("y1", String(this.y(q)));
        line.setAttribute("x2", String(this.width));
        line.setAttribute("y2", String(this.y(k)));
        line.setAttribute("stroke", s.colour);
        line.setAttribute("stroke-opacity", w.toFixed(4));
        line.setAttribute("stroke-width", String(width + 1));
        line.setAttribute("class", "hv-line");
        line.dataset.q = String(q);
        line.dataset.k = String(k);
        line.dataset.head = String(s.head);
        line.dataset.weight = w.toFixed(6);
        frag.append(line);
        labels[j].push([w, s.colour]);
      }
    }
    this.svg.append(frag);
    theirs.forEach((d, j) => {
      const box = d.firstChild.classList.contains("hv-w") ? d.firstChild : d.lastChild;
      this.labelled.push(box);
      box.replaceChildren(...labels[j].map(([w, c]) => {
        const span = el("span", "hv-num", w.toFixed(this.levels === 255 ? 2 : 3));
        span.style.color = c;
        return span;
      }));
    });
    if (this.hover !== null && this.pinned) {
      const j = this.hover;
      const [q, k] = side === "q" ? [i, j] : [j, i];
      const parts = labels[j].map(([w], n) => `${series[n].head === "avg" ? "average" : `head ${series[n].head}`} ${this.exact(w)}`);
      this.say(`“${this.tokens[q]}” (${q}) → “${this.tokens[k]}” (${k}): ${parts.join(", ")}`);
    } else {
      const who = `“${this.tokens[i]}” (${i})`;
      this.say(side === "q"
        ? `${who} attends to each key with the weight beside it${this.pinned ? " (pinned: click again to release)" : ""}.${this.precision()}`
        : `Every query's weight on ${who}${this.pinned ? " (pinned: click again to release)" : ""}.${this.precision()}`);
    }
  }

  // Weights as precise as they travelled: uint16 steps of 1/65535 are exact to 4 decimals; 8-bit ones (past 128
  // tokens) are within half a step of 1/255, so they say so.
  exact(w) {
    return this.levels === 255 ? `${w.toFixed(3)} ± 0.002` : w.toFixed(4);
  }

  precision() {
    return this.levels === 255 ? " Weights here are 8-bit: each within ± 0.002 of the model's." : "";
  }

  describe() {
    const what = this.mode === "avg" ? `average of ${this.H} heads` : this.mode === "one" ? `head ${this.head}` : `heads ${[...this.heads].sort((a, b) => a - b).join(", ")}`;
    return `Layer ${this.layer}, ${what}. Line opacity is the attention weight. Hover or click a token to isolate its lines.${this.precision()}`;
  }

  say(text) {
    this.status.textContent = text;
  }

  stamp() {
    // For tests and the benchmark: when the lines of the last input were on screen (after the next paint).
    const t0 = this.t0;
    this.t0 = undefined;
    this.draws += 1;
    this.root.dataset.draws = String(this.draws);
    if (t0 === undefined) return;
    requestAnimationFrame(() => setTimeout(() => {
      this.root.dataset.inputMs = (performance.now() - t0).toFixed(2);
      this.root.dataset.painted = String(this.draws);
    }, 0));
  }

  // ------------------------------------------------------------------------------------------------ input
  input(event, action) {
    this.t0 = event.timeStamp;
    action();
    if (this.t0 !== undefined) this.t0 = undefined; // nothing was drawn
  }

  enter(side, i) {
    if (this.pinned) {
      const other = this.focus.side === "q" ? "k" : "q";
      const next = side === other ? i : null;
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
      if (side === "q") this.schedule();
    }
    this.hover = null;
    this.draw();
  }

  setLayer(l) {
    if (l === this.layer) return;
    this.layer = l;
    this.draw();
    if (!this.weightsOf(l)) this.sync(true); // a layer not shipped: ask the app for it now (the view's fragment)
    this.schedule(); // and the settled choice once the clicking stops, for the rest of the page
  }

  toggleHead(h) {
    if (this.mode === "avg") return;
    if (this.mode === "one") this.head = h;
    else if (this.heads.has(h) && this.heads.size > 1) this.heads.delete(h);
    else {
      this.heads.add(h);
      this.head = h;
    }
    if (this.mode === "one") this.heads = new Set([h]);
    this.draw();
    this.schedule();
  }

  setMode(mode) {
    if (mode === this.mode) return;
    if (mode === "several" && this.mode === "one") this.heads = new Set([this.head]);
    this.mode = mode;
    this.draw();
    this.schedule();
  }

  schedule() {
    // The settled choice waits for a layer still being fetched: the app's run for it is not cut short.
    clearTimeout(this.timer);
    this.timer = setTimeout(() => (this.weightsOf(this.layer) ? this.sync(false) : this.schedule()), SYNC_MS);
  }

  sync(now) {
    clearTimeout(this.timer);
    this.timer = null;
    const q = this.focus && this.focus.side === "q" && this.pinned ? this.focus.i : undefined;
    const pick = { layer: this.layer, head: this.head, avg: this.mode === "avg" };
    if (q !== undefined) pick.query = q;
    this.sent = pick;
    this.send("pick", { ...pick, need: now });
  }

  // ------------------------------------------------------------------------------------------------ export
  picture() {
    // The view as plain numbers for the exports: token labels, line geometry, title.
    const what = this.mode === "avg" ? "average of heads" : this.mode === "one" ? `head ${this.head}` : `heads ${[...this.heads].sort((a, b) => a - b).join(", ")}`;
    const short = (t) => (t.length > 24 ? `${t.slice(0, 23)}…` : t);
    return { title: `Layer ${this.layer}, ${what}`, tokens: this.tokens.map(short) };
  }

  exportPng() {
    const { title, tokens } = this.picture();
    const rowH = Math.max(this.rowH, 22);
    const font = Math.round(rowH * 0.62);
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = `${font}px Helvetica, Arial, sans-serif`;
    const colW = Math.min(320, Math.max(...tokens.map((t) => measure.measureText(t).width)) + 16);
    const linesW = Math.max(320, Math.min(640, this.width));
    const top = font * 3;
    const W = colW * 2 + linesW;
    const H = top + rowH * this.T + font;
    const scale = 2;
    const c = document.createElement("canvas");
    c.width = W * scale;
    c.height = H * scale;
    const ctx = c.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    ctx.fillStyle = "#212529";
    ctx.font = `bold ${font + 4}px Helvetica, Arial, sans-serif`;
    ctx.fillText(title, 8, font * 1.6);
    ctx.font = `${font}px Helvetica, Arial, sans-serif`;
    ctx.textBaseline = "middle";
    const y = (i) => top + (i + 0.5) * rowH;
    tokens.forEach((t, i) => {
      ctx.textAlign = "right";
      ctx.fillText(t, colW - 8, y(i));
      ctx.textAlign = "left";
      ctx.fillText(t, colW + linesW + 8, y(i));
    });
    lines(ctx, this.series(), this.T, colW, colW + linesW, y, this.lineWidth(), this.focus);
    c.toBlob((blob) => this.download(blob, `${this.name}.png`), "image/png");
  }

  exportSvg() {
    const { title, tokens } = this.picture();
    const rowH = Math.max(this.rowH, 22);
    const font = Math.round(rowH * 0.62);
    const colW = Math.min(320, Math.max(...tokens.map((t) => t.length)) * font * 0.62 + 16);
    const linesW = Math.max(320, Math.min(640, this.width));
    const top = font * 3;
    const W = colW * 2 + linesW;
    const H = top + rowH * this.T + font;
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("xmlns", SVG_NS);
    svg.setAttribute("width", String(W));
    svg.setAttribute("height", String(H));
    svg.setAttribute("font-family", "Helvetica, Arial, sans-serif");
    svg.setAttribute("font-size", String(font));
    const bg = document.createElementNS(SVG_NS, "rect");
    for (const [k, v] of [["width", W], ["height", H], ["fill", "#fff"]]) bg.setAttribute(k, String(v));
    svg.append(bg);
    const text = (s, x, yy, anchor, extra = {}) => {
      const t = document.createElementNS(SVG_NS, "text");
      t.textContent = s; // XMLSerializer escapes it
      for (const [k, v] of Object.entries({ x, y: yy, "text-anchor": anchor, "dominant-baseline": "middle", ...extra })) t.setAttribute(k, String(v));
      svg.append(t);
    };
    text(title, 8, font * 1.4, "start", { "font-weight": "bold", "font-size": font + 4 });
    const y = (i) => top + (i + 0.5) * rowH;
    tokens.forEach((t, i) => {
      text(t, colW - 8, y(i), "end");
      text(t, colW + linesW + 8, y(i), "start");
    });
    const T = this.T;
    for (const s of this.series()) {
      for (let q = 0; q < T; q++) {
        if (this.focus && (this.focus.side === "q" ? q !== this.focus.i : false)) continue;
        for (let k = 0; k < T; k++) {
          if (this.focus && this.focus.side === "k" && k !== this.focus.i) continue;
          const w = s.data[s.offset + q * T + k] * s.scale;
          if (w < MIN_W) continue;
          const line = document.createElementNS(SVG_NS, "line");
          for (const [a, v] of [["x1", colW], ["y1", y(q)], ["x2", colW + linesW], ["y2", y(k)], ["stroke", s.colour],
            ["stroke-opacity", w.toFixed(3)], ["stroke-width", this.lineWidth()]]) line.setAttribute(a, String(v));
          svg.append(line);
        }
      }
    }
    const blob = new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" });
    this.download(blob, `${this.name}.svg`);
  }

  download(blob, filename) {
    const a = el("a");
    a.href = URL.createObjectURL(blob);
    a.download = filename;
    this.root.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 30_000);
  }
}

// Stroke every series' lines from x0 to x1 (query i at y(i), key j at y(j)), opacity = weight. With a focus
// {side, i}, only that token's lines; otherwise lines lighter than MIN_W are left out.
function lines(ctx, series, T, x0, x1, y, width, focus = null, minW = MIN_W) {
  ctx.save();
  ctx.lineWidth = width;
  for (const s of series) {
    const paths = Array.from({ length: BUCKETS }, () => null);
    for (let q = 0; q < T; q++) {
      if (focus && focus.side === "q" && q !== focus.i) continue;
      const yq = y(q);
      const row = s.offset + q * T;
      for (let k = 0; k < T; k++) {
        if (focus && focus.side === "k" && k !== focus.i) continue;
        const w = s.data[row + k] * s.scale;
        if (w < minW) continue;
        const b = Math.min(BUCKETS - 1, Math.floor(w * BUCKETS));
        const p = paths[b] || (paths[b] = new Path2D());
        p.moveTo(x0, yq);
        p.lineTo(x1, y(k));
      }
    }
    ctx.strokeStyle = s.colour;
    paths.forEach((p, b) => {
      if (!p) return;
      ctx.globalAlpha = (b + 0.5) / BUCKETS;
      ctx.stroke(p);
    });
  }
  ctx.restore();
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let view = STATES.get(parentElement);
  if (!view) {
    view = new HeadView(parentElement);
    STATES.set(parentElement, view);
  }
  view.send = setTriggerValue;
  if (data) view.receive(data);
}
