// The one-head attention map past 128 tokens (issue 15), drawn on a canvas: one cell per query x key, scaled
// without smoothing. Joined after ui/component_base.js (ui/components.py). The payload is the head view's
// (ui/payload.py: every layer x head as 8-bit weights deflated layer by layer) with the chosen head's exact float32
// weights as its tail (ui/heatmap.py). Layer and head buttons redraw from what the browser holds, with no script
// run; the settled pick goes back to the app, whose next run brings that head's exact weights. Colours and the
// hover use the exact weights when they are the ones on screen, else the 8-bit ones (within 1/510, which the hover
// says). Colour scales fixed / auto / row are done here; "Average of heads" and hidden [CLS]/[SEP] stay with the
// plotly chart (ui/heatmap.py `fits`).

const LUT = 4096; // colour lookup steps over the scale: within 0.1 of a colour level of exact interpolation
const MAX_SIDE = 640; // the map's largest side in px outside presentation mode
const BAR_W = 18;

// ------------------------------------------------------------------------------------------------ layout
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

// The figure's geometry from the widest token label (px), the font, the room across and, in presentation mode,
// the room down from the figure's top to the bottom of the screen (else null): margins for the labels, the map's
// side, and `step`, every how many tokens a label fits without overprinting (x labels turned 45°: 1.06 em apart).
export function mapFrame({ widest, font, width, room, T }) {
  const left = Math.ceil(widest + font * 2 + 14);
  const bottom = Math.ceil(widest * 0.71 + font * 3 + 16);
  const right = BAR_W + font * 4 + 24;
  let side = Math.min(MAX_SIDE, width - left - right);
  if (room !== null) side = Math.min(side, room - bottom - 8);
  side = Math.max(160, Math.floor(side));
  const step = Math.max(1, Math.ceil(T / Math.max(1, Math.floor(side / (font * 1.5)))));
  return { left, bottom, right, side, step };
}

// ------------------------------------------------------------------------------------------------ drawing
// The colour scale's top: 1 (fixed), the map's largest value (auto); per row it is each row's own maximum.
export function scaleTop(plane, T, scale) {
  if (scale !== "auto") return 1;
  let m = 0;
  for (let x = 0, n = T * T; x < n; x++) m = Math.max(m, valueAt(plane, x));
  return m > 0 ? m : 1;
}

// One RGBA pixel per cell into px (T x T x 4) from the palette; returns the scale's top.
export function paint(px, plane, T, scale, lut) {
  const top = scaleTop(plane, T, scale);
  for (let q = 0; q < T; q++) {
    let m = top;
    if (scale === "row") {
      m = 0;
      for (let k = 0; k < T; k++) m = Math.max(m, valueAt(plane, q * T + k));
      m = Math.max(m, 1e-30);
    }
    const f = (LUT - 1) / m;
    for (let k = 0; k < T; k++) {
      const x = q * T + k;
      const c = Math.min(LUT - 1, Math.max(0, Math.round(valueAt(plane, x) * f))) * 3;
      px[x * 4] = lut[c];
      px[x * 4 + 1] = lut[c + 1];
      px[x * 4 + 2] = lut[c + 2];
      px[x * 4 + 3] = 255;
    }
  }
  return top;
}

class AttentionMap extends View {
  constructor(parent) {
    super(parent, "hm", () => this.layers.has(this.layer) || !!this.exactHere());
    this.build();
    this.wire();
  }

  build() {
    const { bar, layerBox, headBox, buttons } = toolbar([], { PNG: "Save this map as a PNG for slides" });
    Object.assign(this, { layerBox, headBox, buttons });
    this.title = el("div", "hm-title");
    this.read = statusLine("hm-read");
    this.fig = el("div", "hm-fig");
    const parts = { yTitle: ["div", "hm-axis hm-ytitle", "query (attending)"], yTicks: ["div", "hm-ticks"],
      map: ["canvas", "hm-map"], xTicks: ["div", "hm-ticks"], xTitle: ["div", "hm-axis hm-xtitle", "key (attended to)"],
      cbar: ["canvas", "hm-cbar"], cTicks: ["div", "hm-ticks"], cTitle: ["div", "hm-axis hm-ctitle"] };
    for (const [name, [tag, cls, text]] of Object.entries(parts)) this.fig.append((this[name] = el(tag, cls, text)));
    this.root.append(bar, this.title, this.read, this.fig);
    this.source = el("canvas"); // T x T, one pixel per cell
  }

  // ---------------------------------------------------------------------------------------------- data
  receive(bytes) {
    const payload = decode(bytes);
    const { header: h } = payload;
    const sel = h.sel;
    const fresh = this.layers.take(payload);
    const changed = this.sync.fromApp(sel, ["layer", "head"]); // the app's choice where it changed on its side
    if (fresh) {
      Object.assign(this, { T: h.T, H: h.H, L: h.L, tokens: h.tokens, layer: sel.layer, head: sel.head });
      this.layerBox.replaceChildren(...picker("Layer", this.L, "layer"));
      this.headBox.replaceChildren(...picker("Head", this.H, "head"));
    } else Object.assign(this, changed);
    Object.assign(this, { scale: sel.scale, barTitle: sel.bar, names: sel.names, labels: sel.labels, train: sel.train });
    if (!this.lut || this.stopsKey !== JSON.stringify(sel.stops)) {
      this.stopsKey = JSON.stringify(sel.stops);
      this.lut = palette(sel.stops);
    }
    const exact = aligned(payload.tail, Float32Array);
    this.exact = exact.length === this.T * this.T
      ? { layer: sel.layer, head: sel.head, plane: { data: exact, offset: 0, scale: 1 } } : null;
    this.root.classList.toggle("present", !!h.present);
    this.root.dataset.t = String(this.T);
    this.layout();
  }

  arrived(layer) {
    this.root.dataset.held = this.layers.list();
    if (layer === this.layer && !this.exactHere()) this.draw();
  }

  exactHere() {
    const x = this.exact;
    return x && x.layer === this.layer && x.head === this.head ? x.plane : null;
  }

  // The shown head's plane and whether it is exact; null while its layer is not here.
  shown() {
    const exact = this.exactHere();
    if (exact) return { plane: exact, exact: true };
    const plane = this.layers.plane(this.layer, this.head);
    return plane && { plane, exact: false };
  }

  // ---------------------------------------------------------------------------------------------- layout
  // The map square as wide as there is room (presentation mode: as tall as fits down to the bottom of the screen),
  // token labels on every k-th row and column so they never overprint.
  layout() {
    if (!this.tokens) return;
    const present = this.root.classList.contains("present");
    const font = present ? MIN_LABEL_PX : 12;
    const family = getComputedStyle(this.root).fontFamily;
    const room = present ? window.innerHeight - pageTop(this.fig) : null;
    const frame = mapFrame({ widest: widest(this.labels, `${font}px ${family}`), font, width: this.root.clientWidth,
      room, T: this.T });
    Object.assign(this, frame, { font, family });
    const { left, side, bottom, right } = frame;
    this.fig.style.setProperty("--font", `${font}px`);
    Object.assign(this.fig.style, { width: `${left + side + right}px`, height: `${side + bottom}px` });
    for (const [c, w, x] of [[this.map, side, left], [this.cbar, BAR_W, left + side + 12]]) {
      fitCanvas(c, w, side);
      Object.assign(c.style, { left: `${x}px`, top: "0px" });
    }
    Object.assign(this.yTitle.style, { left: "0px", top: `${side / 2}px` });
    Object.assign(this.xTitle.style, { left: `${left + side / 2}px`, top: `${side + bottom - font * 1.6}px` });
    Object.assign(this.cTitle.style, { left: `${left + side + 12 + BAR_W + font * 3.2}px`, top: `${side / 2}px` });
    this.ticks();
    this.draw();
  }

  ticks() {
    const { T, side, left, step } = this;
    const at = (i) => (i + 0.5) * (side / T);
    const ys = [];
    const xs = [];
    for (let i = 0; i < T; i += step) {
      const y = el("span", "hm-tick hm-y", this.labels[i]);
      Object.assign(y.style, { right: `calc(100% - ${left - 4}px)`, top: `${at(i)}px` });
      const x = el("span", "hm-tick hm-x", this.labels[i]);
      Object.assign(x.style, { right: `calc(100% - ${left + at(i)}px)`, top: `${side + 4}px` });
      y.title = x.title = `${this.tokens[i]} (${i})`;
      ys.push(y);
      xs.push(x);
    }
    this.yTicks.replaceChildren(...ys);
    this.xTicks.replaceChildren(...xs);
  }

  // ---------------------------------------------------------------------------------------------- drawing
  draw() {
    const src = this.shown();
    this.root.classList.toggle("loading", !src);
    markOn(this.layerBox, "layer", (l) => l === this.layer);
    markOn(this.headBox, "head", (h) => h === this.head);
    Object.assign(this.root.dataset, { layer: String(this.layer), head: String(this.head), step: String(this.step) });
    if (!src || !this.side) return; // a layer still inflating: the previous map stays (dimmed) until it arrives
    const T = this.T;
    Object.assign(this.source, { width: T, height: T });
    const sctx = this.source.getContext("2d");
    const img = sctx.createImageData(T, T);
    this.barTop = paint(img.data, src.plane, T, this.scale, this.lut);
    sctx.putImageData(img, 0, 0);
    const ctx = this.map.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.imageSmoothingEnabled = false; // one block of pixels per cell: nearest neighbour, never blurred
    ctx.drawImage(this.source, 0, 0, this.map.width, this.map.height);
    this.colourBar();
    this.title.textContent = this.caption();
    this.showRead();
    Object.assign(this.root.dataset, { exact: src.exact ? "1" : "0", title: this.title.textContent });
    this.stamp.drawn();
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
    this.cTicks.replaceChildren(...[0, 1, 2, 3, 4].map((n) => {
      const t = el("span", "hm-tick hm-c", ((top * n) / 4).toFixed(top < 0.1 ? 3 : 2));
      Object.assign(t.style, { left: `${this.left + this.side + 12 + BAR_W + 4}px`, top: `${this.side * (1 - n / 4)}px` });
      return t;
    }));
    this.cTitle.textContent = this.barTitle;
  }

  // "query → key: weight": exact weights to 4 decimals; 8-bit ones to 3, with their precision.
  showRead() {
    const src = this.shown();
    const r = this.read.dataset;
    if (!this.at || !src) {
      this.read.textContent = src && !src.exact
        ? "Hover a cell for its weight. Colours from 8-bit weights (± 0.002) until this head's exact weights arrive."
        : "Hover a cell for its weight.";
      for (const k of ["q", "k", "weight", "exact"]) delete r[k];
      return;
    }
    const { q, k } = this.at;
    const w = valueAt(src.plane, q * this.T + k);
    this.read.textContent = pairText(this.tokens, q, k, weightText(w, src.exact ? 0 : this.layers.halfStep(this.layer)));
    Object.assign(r, { q: String(q), k: String(k), weight: String(w), exact: src.exact ? "1" : "0" });
  }

  // The map as on screen, at PNG_SCALE: title, token labels, cells (nearest neighbour), colour bar.
  exportPng() {
    if (!this.shown()) return;
    const { font, family, side, left, bottom, T, step } = this;
    const head = font * 3;
    const W = left + side + BAR_W + font * 6 + 24;
    const ctx = exportCanvas(W, head + side + bottom);
    ctx.fillStyle = "#212529";
    ctx.font = `bold ${font + 4}px ${family}`;
    ctx.fillText(this.caption(), 8, font * 1.8);
    ctx.font = `${font}px ${family}`;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.source, left, head, side, side);
    ctx.drawImage(this.cbar, left + side + 12, head, BAR_W, side);
    ctx.textBaseline = "middle";
    for (let i = 0; i < T; i += step) {
      const at = (i + 0.5) * (side / T);
      ctx.textAlign = "right";
      ctx.fillText(this.labels[i], left - 4, head + at);
      ctx.save();
      ctx.translate(left + at, head + side + 4);
      ctx.rotate(-Math.PI / 4);
      ctx.fillText(this.labels[i], 0, 0);
      ctx.restore();
    }
    ctx.textAlign = "left";
    for (const t of this.cTicks.children) ctx.fillText(t.textContent, left + side + 16 + BAR_W, head + parseFloat(t.style.top));
    ctx.textAlign = "center";
    ctx.fillText("key (attended to)", left + side / 2, head + side + bottom - font);
    savePng(ctx.canvas, this.root, `${this.names[this.layer][this.head]}.png`);
  }

  // ---------------------------------------------------------------------------------------------- input
  wire() {
    const h = this.hooks;
    onButton(h, this.layerBox, "layer", (l, e) => this.pick(l, this.head, e.timeStamp));
    onButton(h, this.headBox, "head", (n, e) => this.pick(this.layer, n, e.timeStamp));
    h.listen(this.buttons.PNG, "click", () => this.exportPng());
    h.listen(this.map, "mousemove", (e) => this.hover(e));
    h.listen(this.map, "mouseleave", () => this.hover(null));
    h.resized(this.root, () => this.layout());
  }

  hover(e) {
    this.at = null;
    if (e) {
      const box = this.map.getBoundingClientRect();
      const k = Math.floor(((e.clientX - box.left) / box.width) * this.T);
      const q = Math.floor(((e.clientY - box.top) / box.height) * this.T);
      if (q >= 0 && q < this.T && k >= 0 && k < this.T) this.at = { q, k };
    }
    this.showRead();
  }

  pick(layer, head, since) {
    if (layer === this.layer && head === this.head) return;
    this.stamp.input(since); // stamp.drawn() reports when the input's map was painted
    Object.assign(this, { layer, head });
    this.draw();
    this.stamp.idle();
    // ---------------------------------------------------------------------------------------------- sync
    this.sync.settle(() => ({ layer: this.layer, head: this.head, avg: false }));
  }
}

export default (component) => mount(component, AttentionMap);
