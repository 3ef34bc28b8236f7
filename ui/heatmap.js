// The one-head attention map past 128 tokens (issue 15), drawn on a canvas: one cell per query x key, scaled
// without smoothing. The payload is the head view's (ui/headview.py: a JSON header, every layer x head as 8-bit
// weights deflated layer by layer) followed by the chosen head's exact float32 weights (ui/heatmap.py). Layer and
// head buttons redraw from what the browser holds, with no script run; the settled pick goes back to the app,
// whose next run brings that head's exact weights. Colours and the hover use the exact weights when they are the
// ones on screen, else the 8-bit ones (within 1/510, which the hover says). Colour scales fixed / auto / row are
// done here; "Average of heads" and hidden [CLS]/[SEP] stay with the plotly chart (ui/heatmap.py `fits`).
// User text reaches the DOM only through textContent (and canvas fillText for the PNG): never as markup.

const STATES = new WeakMap(); // parentElement -> view; Streamlit calls the default export again on every rerun
const SYNC_MS = 800; // the pick goes back to the app once the clicking stops: browsing heads costs no rerun
const LUT = 4096; // colour lookup steps over the scale: within 0.1 of a colour level of exact interpolation
const MIN_LABEL_PX = 14; // presentation mode: no label smaller (the back row of a lecture hall)
const MAX_SIDE = 640; // the map's largest side in px outside presentation mode
const BAR_W = 18;

const make = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
};

// [uint32 LE header length][header JSON][padding to 8][deflated layers, sizes in header.zipped][float32 T x T]
function unpack(bytes) {
  const size = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + size)));
  let at = Math.ceil((4 + size) / 8) * 8;
  const chunks = header.zipped.map((n) => bytes.subarray(at, (at += n)));
  return { header, chunks, exact: new Float32Array(bytes.slice(at).buffer) }; // slice: a fresh, aligned buffer
}

async function inflated(chunk) {
  const stream = new Blob([chunk]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// 4096 colours along the scale's stops ([at, r, g, b]), linear in RGB between stops as plotly.js draws them.
function palette(stops) {
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

class AttentionMap {
  constructor(parent) {
    this.root = make("div", "hm");
    parent.appendChild(this.root);
    // layers: layer -> Uint8Array (H * T * T) in steps of 1/255; sent: the last pick sent to the app
    Object.assign(this, { layers: new Map(), id: null, timer: null, sent: null, serverSel: null, draws: 0,
      send: () => {} });
    this.build();
  }

  build() {
    const bar = make("div", "hm-bar");
    const [layerBox, headBox, exports] = ["hm-group", "hm-group", "hm-group"].map((c) => make("div", c));
    Object.assign(this, { layerBox, headBox });
    this.pngBtn = make("button", "hm-btn", "PNG");
    this.pngBtn.title = "Save this map as a PNG for slides";
    exports.append(make("span", "hm-label", "Export"), this.pngBtn);
    bar.append(this.layerBox, this.headBox, exports);
    this.title = make("div", "hm-title");
    this.read = make("div", "hm-read");
    this.read.setAttribute("aria-live", "polite");
    this.fig = make("div", "hm-fig");
    this.yTitle = make("div", "hm-axis hm-ytitle", "query (attending)");
    this.xTitle = make("div", "hm-axis hm-xtitle", "key (attended to)");
    this.yTicks = make("div", "hm-ticks");
    this.xTicks = make("div", "hm-ticks");
    this.map = make("canvas", "hm-map");
    this.cbar = make("canvas", "hm-cbar");
    this.cTicks = make("div", "hm-ticks");
    this.cTitle = make("div", "hm-axis hm-ctitle");
    this.fig.append(this.yTitle, this.yTicks, this.map, this.xTicks, this.xTitle, this.cbar, this.cTicks, this.cTitle);
    this.root.append(bar, this.title, this.read, this.fig);
    this.source = document.createElement("canvas"); // T x T, one pixel per cell

    this.layerBox.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-layer]");
      if (b) this.pick(+b.dataset.layer, this.head, e.timeStamp);
    });
    this.headBox.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-head]");
      if (b) this.pick(this.layer, +b.dataset.head, e.timeStamp);
    });
    this.pngBtn.addEventListener("click", () => this.exportPng());
    this.map.addEventListener("mousemove", (e) => this.hover(e));
    this.map.addEventListener("mouseleave", () => this.hover(null));
    new ResizeObserver(() => this.layout()).observe(this.root);
    window.addEventListener("resize", () => this.layout());
  }

  // ------------------------------------------------------------------------------------------------ data
  receive(bytes) {
    const { header: h, chunks, exact } = unpack(bytes);
    const sel = h.sel;
    if (h.id !== this.id) {
      this.id = h.id;
      this.layers.clear();
      this.inflating = new Set();
      Object.assign(this, { T: h.T, H: h.H, L: h.L, tokens: h.tokens });
      this.layer = sel.layer;
      this.head = sel.head;
      this.buildPickers();
    } else if (this.serverSel && this.timer === null) {
      // The app's choice only when it changed on the app's side (the URL, another page), never an echo of ours.
      for (const k of ["layer", "head"]) {
        if (sel[k] !== this.serverSel[k] && !(this.sent && this.sent[k] === sel[k])) this[k] = sel[k];
      }
    }
    this.serverSel = sel;
    Object.assign(this, { scale: sel.scale, barTitle: sel.bar, names: sel.names, labels: sel.labels, train: sel.train });
    if (!this.lut || this.stopsKey !== JSON.stringify(sel.stops)) {
      this.stopsKey = JSON.stringify(sel.stops);
      this.lut = palette(sel.stops);
    }
    this.exact = exact.length === this.T * this.T ? { layer: sel.layer, head: sel.head, w: exact } : null;
    this.root.classList.toggle("present", !!h.present);
    this.root.dataset.t = String(this.T);
    h.layers.forEach((layer, n) => this.arrive(h.id, layer, chunks[n]));
    this.layout();
  }

  async arrive(id, layer, chunk) {
    // Each deflated layer is inflated once, off the main thread; the shown one is drawn when it lands.
    if (this.layers.has(layer) || this.inflating.has(layer)) return;
    this.inflating.add(layer);
    const w = await inflated(chunk);
    this.inflating.delete(layer);
    if (this.id !== id || w.length !== this.H * this.T * this.T) return;
    this.layers.set(layer, w);
    this.root.dataset.held = [...this.layers.keys()].sort((x, y) => x - y).join(",");
    if (layer === this.layer && !this.exactHere()) this.draw();
  }

  exactHere() {
    const x = this.exact;
    return x && x.layer === this.layer && x.head === this.head ? x.w : null;
  }

  // The shown head's weights: (index q * T + k) -> weight, and whether they are exact; null if not here yet.
  weights() {
    const w = this.exactHere();
    if (w) return { at: (x) => w[x], exact: true };
    const w8 = this.layers.get(this.layer);
    if (!w8) return null;
    const off = this.head * this.T * this.T;
    return { at: (x) => w8[off + x] / 255, exact: false };
  }

  // ------------------------------------------------------------------------------------------------ DOM
  buildPickers() {
    const buttons = (label, n, attr) => [make("span", "hm-label", label), ...Array.from({ length: n }, (_, i) => {
      const b = make("button", "hm-btn", String(i));
      b.dataset[attr] = String(i);
      return b;
    })];
    this.layerBox.replaceChildren(...buttons("Layer", this.L, "layer"));
    this.headBox.replaceChildren(...buttons("Head", this.H, "head"));
  }

  // Sizes: the map square as wide as there is room (presentation mode: as tall as fits between its top and the
  // bottom of the screen), token labels on every k-th row and column so they never overprint.
  layout() {
    if (!this.tokens) return;
    const present = this.root.classList.contains("present");
    const font = present ? MIN_LABEL_PX : 12;
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = `${font}px ${getComputedStyle(this.root).fontFamily}`;
    const widest = Math.max(...this.labels.map((t) => measure.measureText(t).width));
    const left = Math.ceil(widest + font * 2 + 14);
    const bottom = Math.ceil(widest * 0.71 + font * 3 + 16);
    const right = BAR_W + font * 4 + 24;
    const width = this.root.clientWidth;
    let side = Math.min(MAX_SIDE, width - left - right);
    if (present) {
      const scroller = document.querySelector('[data-testid="stMain"]');
      const top = this.fig.getBoundingClientRect().top + (scroller ? scroller.scrollTop : window.scrollY);
      side = Math.min(side, window.innerHeight - top - bottom - 8);
    }
    side = Math.max(160, Math.floor(side));
    Object.assign(this, { font, side, left, bottom });
    this.step = Math.max(1, Math.ceil(this.T / Math.max(1, Math.floor(side / (font * 1.5))))); // rotated: 1.06 em apart
    this.fig.style.setProperty("--font", `${font}px`);
    this.fig.style.width = `${left + side + right}px`;
    this.fig.style.height = `${side + bottom}px`;
    const dpr = window.devicePixelRatio || 1;
    for (const [c, w] of [[this.map, side], [this.cbar, BAR_W]]) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(side * dpr);
      Object.assign(c.style, { width: `${w}px`, height: `${side}px`, top: "0px" });
    }
    this.map.style.left = `${left}px`;
    this.cbar.style.left = `${left + side + 12}px`;
    Object.assign(this.yTitle.style, { left: "0px", top: `${side / 2}px` });
    Object.assign(this.xTitle.style, { left: `${left + side / 2}px`, top: `${side + bottom - font * 1.6}px` });
    Object.assign(this.cTitle.style, { left: `${left + side + 12 + BAR_W + font * 3.2}px`, top: `${side / 2}px` });
    this.ticks();
    this.draw();
  }

  ticks() {
    const { T, side, left, step } = this;
    const cell = side / T;
    const ys = [];
    const xs = [];
    for (let i = 0; i < T; i += step) {
      const y = make("span", "hm-tick hm-y", this.labels[i]); // textContent: a token is never markup
      Object.assign(y.style, { right: `calc(100% - ${left - 4}px)`, top: `${(i + 0.5) * cell}px` });
      const x = make("span", "hm-tick hm-x", this.labels[i]);
      Object.assign(x.style, { right: `calc(100% - ${left + (i + 0.5) * cell}px)`, top: `${side + 4}px` });
      y.title = x.title = `${this.tokens[i]} (${i})`;
      ys.push(y);
      xs.push(x);
    }
    this.yTicks.replaceChildren(...ys);
    this.xTicks.replaceChildren(...xs);
  }

  // ------------------------------------------------------------------------------------------------ drawing
  top(get) {
    // The colour scale's top: 1 (fixed), this map's largest weight (auto); per row it is each row's own maximum.
    if (this.scale !== "auto") return 1;
    let m = 0;
    for (let x = 0, n = this.T * this.T; x < n; x++) m = Math.max(m, get(x));
    return m > 0 ? m : 1;
  }

  paintSource(get) {
    const T = this.T;
    this.source.width = T;
    this.source.height = T;
    const ctx = this.source.getContext("2d");
    const img = ctx.createImageData(T, T);
    const px = img.data;
    const lut = this.lut;
    const top = this.top(get);
    for (let q = 0; q < T; q++) {
      let m = top;
      if (this.scale === "row") {
        m = 0;
        for (let k = 0; k < T; k++) m = Math.max(m, get(q * T + k));
        m = Math.max(m, 1e-30);
      }
      const f = (LUT - 1) / m;
      for (let k = 0; k < T; k++) {
        const x = q * T + k;
        const c = Math.min(LUT - 1, Math.max(0, Math.round(get(x) * f))) * 3;
        px[x * 4] = lut[c];
        px[x * 4 + 1] = lut[c + 1];
        px[x * 4 + 2] = lut[c + 2];
        px[x * 4 + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    return top;
  }

  draw() {
    const src = this.weights();
    this.root.classList.toggle("loading", !src);
    this.refresh();
    if (!src || !this.side) return; // a layer still inflating: the previous map stays (dimmed) until it arrives
    this.barTop = this.paintSource(src.at);
    const ctx = this.map.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.imageSmoothingEnabled = false; // one block of pixels per cell: nearest neighbour, never blurred
    ctx.drawImage(this.source, 0, 0, this.map.width, this.map.height);
    this.colourBar();
    this.title.textContent = this.caption();
    this.showRead();
    this.stamp(src.exact);
  }

  caption() {
    return `Attention, layer ${this.layer}, head ${this.head}${this.train ? " · training mode: dropout on" : ""}`;
  }

  colourBar() {
    const ctx = this.cbar.getContext("2d");
    const h = this.cbar.height;
    for (let y = 0; y < h; y++) {
      const c = Math.round((1 - y / Math.max(1, h - 1)) * (LUT - 1)) * 3;
      ctx.fillStyle = `rgb(${this.lut[c]},${this.lut[c + 1]},${this.lut[c + 2]})`;
      ctx.fillRect(0, y, this.cbar.width, 1);
    }
    const top = this.scale === "row" ? 1 : this.barTop;
    const ticks = [];
    for (let n = 0; n <= 4; n++) {
      const v = (top * n) / 4;
      const t = make("span", "hm-tick hm-c", v.toFixed(top < 0.1 ? 3 : 2));
      Object.assign(t.style, { left: `${this.left + this.side + 12 + BAR_W + 4}px`, top: `${this.side * (1 - n / 4)}px` });
      ticks.push(t);
    }
    this.cTicks.replaceChildren(...ticks);
    this.cTitle.textContent = this.barTitle;
  }

  refresh() {
    for (const b of this.layerBox.querySelectorAll("button")) b.classList.toggle("on", +b.dataset.layer === this.layer);
    for (const b of this.headBox.querySelectorAll("button")) b.classList.toggle("on", +b.dataset.head === this.head);
    Object.assign(this.root.dataset, { layer: String(this.layer), head: String(this.head), step: String(this.step) });
  }

  hover(e) {
    if (!e) {
      this.at = null;
    } else {
      const box = this.map.getBoundingClientRect();
      const k = Math.floor(((e.clientX - box.left) / box.width) * this.T);
      const q = Math.floor(((e.clientY - box.top) / box.height) * this.T);
      this.at = q >= 0 && q < this.T && k >= 0 && k < this.T ? { q, k } : null;
    }
    this.showRead();
  }

  // "query → key: weight": exact weights to 4 decimals; 8-bit ones to 3, with their precision.
  showRead() {
    const src = this.weights();
    const r = this.read.dataset;
    if (!this.at || !src) {
      this.read.textContent = src && !src.exact
        ? "Hover a cell for its weight. Colours from 8-bit weights (± 0.002) until this head's exact weights arrive."
        : "Hover a cell for its weight.";
      for (const k of ["q", "k", "weight", "exact"]) delete r[k];
      return;
    }
    const { q, k } = this.at;
    const w = src.at(q * this.T + k);
    const shown = src.exact ? w.toFixed(4) : `${w.toFixed(3)} ± 0.002`;
    this.read.textContent = `“${this.tokens[q]}” (${q}) → “${this.tokens[k]}” (${k}): ${shown}`;
    Object.assign(r, { q: String(q), k: String(k), weight: String(w), exact: src.exact ? "1" : "0" });
  }

  stamp(exact) {
    // For tests and the benchmark: what is drawn, and when the last input's map was on screen (after the next paint).
    this.draws += 1;
    Object.assign(this.root.dataset, { draws: String(this.draws), exact: exact ? "1" : "0", title: this.title.textContent });
    const since = this.t0;
    this.t0 = undefined;
    if (since === undefined) return;
    const n = this.draws;
    requestAnimationFrame(() => setTimeout(() => Object.assign(this.root.dataset, {
      inputMs: (performance.now() - since).toFixed(2), painted: String(n) }), 0));
  }

  // ------------------------------------------------------------------------------------------------ input
  pick(layer, head, since) {
    if (layer === this.layer && head === this.head) return;
    this.t0 = since; // the input event's time: stamp() reports when its map was painted
    this.layer = layer;
    this.head = head;
    this.draw();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.sync(), SYNC_MS);
  }

  sync() {
    if (!this.layers.has(this.layer) && !this.exactHere()) {
      this.timer = setTimeout(() => this.sync(), SYNC_MS); // the layer is still inflating
      return;
    }
    this.timer = null;
    this.sent = { layer: this.layer, head: this.head };
    this.send("pick", { ...this.sent, avg: false });
  }

  // ------------------------------------------------------------------------------------------------ export
  // The map as on screen, at twice the size: title, token labels, cells (nearest neighbour), colour bar.
  exportPng() {
    if (!this.weights()) return;
    const { font, side, left, bottom, T, step } = this;
    const family = getComputedStyle(this.root).fontFamily;
    const head = font * 3;
    const W = left + side + BAR_W + font * 6 + 24;
    const H = head + side + bottom;
    const c = document.createElement("canvas");
    c.width = W * 2;
    c.height = H * 2;
    const ctx = c.getContext("2d");
    ctx.scale(2, 2);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    ctx.fillStyle = "#212529";
    ctx.font = `bold ${font + 4}px ${family}`;
    ctx.fillText(this.caption(), 8, font * 1.8);
    ctx.font = `${font}px ${family}`;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.source, left, head, side, side);
    ctx.drawImage(this.cbar, left + side + 12, head, BAR_W, side);
    const cell = side / T;
    ctx.textBaseline = "middle";
    for (let i = 0; i < T; i += step) {
      ctx.textAlign = "right";
      ctx.fillText(this.labels[i], left - 4, head + (i + 0.5) * cell);
      ctx.save();
      ctx.translate(left + (i + 0.5) * cell, head + side + 4);
      ctx.rotate(-Math.PI / 4);
      ctx.fillText(this.labels[i], 0, 0);
      ctx.restore();
    }
    ctx.textAlign = "left";
    for (const t of this.cTicks.children) ctx.fillText(t.textContent, left + side + 16 + BAR_W, head + parseFloat(t.style.top));
    ctx.textAlign = "center";
    ctx.fillText("key (attended to)", left + side / 2, head + side + bottom - font);
    c.toBlob((blob) => this.download(blob, `${this.names[this.layer][this.head]}.png`), "image/png");
  }

  download(blob, filename) {
    const link = Object.assign(make("a"), { href: URL.createObjectURL(blob), download: filename });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 30_000);
  }
}

export default function ({ data, parentElement, setTriggerValue }) {
  const view = STATES.get(parentElement) ?? new AttentionMap(parentElement);
  STATES.set(parentElement, view);
  view.send = setTriggerValue;
  if (data) view.receive(data);
}
