// Panel figures (ui/panels.py): Inside a head's step charts painted on one canvas, after ui/component_base.js.
// The layout is the plotly figure's (encoder/viz/heads.py): panels on paper coordinates of the plot area, each a grid
// of cells in its colour scale (the model's values, NaN an empty cell), the values printed where the figure prints
// them, row labels left of a panel that has them, colour bars right of the plot, titles, outlines. Every text is
// drawn with fillText or written as textContent (the hover read-out): a token is never markup.

const TEXT_DARK = "#212529";
const SUB_COLOUR = "#495057";
const BAR_GAP = 0.02; // a colour bar's left edge, past the plot's right edge, as a share of the plot's width (plotly)

// ------------------------------------------------------------------------------------------------ payload
// The header and each panel's values: {header, values: [Float32Array | Float64Array, ...]}.
export function decodePanels(bytes) {
  const { header, body } = framed(bytes);
  const values = header.panels.map((p) => {
    if (p.product) return null;
    const count = p.shape[0] * p.shape[1];
    const Type = p.dtype === "f8" ? Float64Array : Float32Array;
    return aligned(bytes.subarray(body + p.at, body + p.at + count * Type.BYTES_PER_ELEMENT), Type);
  });
  header.panels.forEach((p, i) => {
    if (p.product) values[i] = rowScaled(values[p.product[0]], values[p.product[1]], p.shape);
  });
  return { header, values };
}

// Each row r of a rows x cols grid times column[r], in float64 as Python computed it (the weighted values a_ij v_j).
export function rowScaled(column, grid, [rows, cols]) {
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = column[r] * grid[r * cols + c];
  return out;
}

// Whether two payloads hold the same bytes: a chart with the same header may hold other numbers (another seed).
export function sameBytes(a, b) {
  if (!a || a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

// ------------------------------------------------------------------------------------------------ text
// A value as a d3 format of the kind the figures use (".4f": fixed decimals), else as JavaScript writes it.
export function formatted(v, spec) {
  const m = /^\.(\d+)f$/.exec(spec || "");
  return m ? v.toFixed(+m[1]) : String(v);
}

// A hover template ("k of %{y}, dim %{x}: %{z:.4f}") filled in for one cell.
export const filled = (template, x, y, z) => template.replace(/%\{([xyz])(?::([^}]*))?\}/g, (_, k, spec) => (
  k === "x" ? String(x) : k === "y" ? y : formatted(z, spec)));

// Round steps for an axis or a colour bar from lo to hi, about `count` of them: multiples of 1, 2 or 5 x 10^k.
export function niceTicks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * power).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(12));
  return out;
}

const tickText = (v) => String(+v.toPrecision(6));

// Black or white text on a cell, whichever reads better on its colour (as plotly picks a heatmap's text colour).
export const inkOn = ([r, g, b]) => (0.299 * r + 0.587 * g + 0.114 * b > 140 ? TEXT_DARK : "#fff");

// ------------------------------------------------------------------------------------------------ layout
// Where everything goes at width W (CSS px), given measure(text, px) -> width: the plot area {x0, y0, w, h} and each
// panel's box {left, top, right, bottom}. Room is made as plotly makes it: on the left for the widest row label, on
// the right for the colour bars with their numbers and titles, below for the tick labels of a bottom axis.
export function layoutPanels(header, W, measure) {
  const { margin, size, panels } = header;
  const labelled = panels.filter((p) => p.ticks);
  const leftNeed = labelled.length ? Math.max(...labelled.map((p) => Math.max(...p.rows.map((r) => measure(r, size))))) + 8 : 0;
  const bars = panels.filter((p) => p.bar);
  const barNeed = bars.length ? Math.max(...bars.map((p) => p.bar.thickness + 6
    + Math.max(...niceTicks(p.zmin, p.zmax, 5).map((t) => measure(tickText(t), size)))
    + (p.bar.title ? size * 1.6 : 0))) + 4 : 0;
  const axisNeed = panels.some((p) => p.xticks) ? Math.ceil(size * 1.5 + (panels.some((p) => p.xtitle) ? size * 1.4 : 0) + 6) : 0;
  const left = Math.min(...panels.map((p) => p.x[0]));
  let x0 = margin.l;
  let w = W - margin.l - margin.r;
  for (let round = 0; round < 3; round++) { // the room each side needs depends on the plot's width: settle it
    x0 = margin.l + Math.max(0, leftNeed - left * w);
    w = Math.max(40, (W - margin.r - x0 - barNeed) / (bars.length ? 1 + BAR_GAP : 1));
  }
  const y0 = margin.t;
  const h = Math.max(40, header.height - margin.t - Math.max(margin.b, axisNeed));
  const boxes = panels.map((p) => ({ left: x0 + p.x[0] * w, right: x0 + p.x[1] * w,
    top: y0 + (1 - p.y[1]) * h, bottom: y0 + (1 - p.y[0]) * h }));
  return { x0, y0, w, h, boxes };
}

// The cell of panel box b (rows x cols) at (x, y), or null.
export function cellAt(b, [rows, cols], x, y) {
  if (x < b.left || x >= b.right || y < b.top || y >= b.bottom) return null;
  return { row: Math.min(rows - 1, Math.floor(((y - b.top) / (b.bottom - b.top)) * rows)),
    col: Math.min(cols - 1, Math.floor(((x - b.left) / (b.right - b.left)) * cols)) };
}

// ------------------------------------------------------------------------------------------------ drawing
const font = (header, px) => `${px}px ${header.font}`;

// Write a text and note where it landed ({kind, text, px: its font size, left, top, right, bottom} in CSS px, and
// `cell`: the width of the cell a printed number sits in): the component keeps the list (root.drawn) for the tests
// that check no text is cut, crowded or too small.
function put(ctx, drawn, kind, text, x, y, cell) {
  ctx.fillText(text, x, y);
  if (!drawn) return;
  const m = ctx.measureText(text);
  drawn.push({ kind, text, px: parseFloat(ctx.font), left: x - m.actualBoundingBoxLeft,
    right: x + m.actualBoundingBoxRight, top: y - m.actualBoundingBoxAscent, bottom: y + m.actualBoundingBoxDescent,
    ...(cell ? { cell } : {}) });
}

// The palette index of value v on zmin..zmax (NaN: -1).
const shade = (v, zmin, zmax) => (Number.isNaN(v) ? -1
  : Math.round(Math.min(1, Math.max(0, (v - zmin) / Math.max(zmax - zmin, 1e-30))) * (LUT - 1)));

// One panel's cells: one pixel per cell scaled up with smoothing off (crisp edges at every size).
function drawCells(ctx, box, p, z, lut) {
  const [rows, cols] = p.shape;
  const img = new ImageData(cols, rows);
  for (let i = 0; i < rows * cols; i++) {
    const c = shade(z[i], p.zmin, p.zmax);
    if (c < 0) continue; // transparent: the white page shows (a key outside the window)
    img.data.set([lut[c * 3], lut[c * 3 + 1], lut[c * 3 + 2], 255], i * 4);
  }
  const small = document.createElement("canvas");
  small.width = cols;
  small.height = rows;
  small.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, box.left, box.top, box.right - box.left, box.bottom - box.top);
}

function drawPrinted(ctx, drawn, header, box, p, z, lut) {
  const [rows, cols] = p.shape;
  const cw = (box.right - box.left) / cols;
  const rh = (box.bottom - box.top) / rows;
  ctx.font = font(header, p.textSize);
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = z[r * cols + c];
      if (Number.isNaN(v)) continue;
      const s = shade(v, p.zmin, p.zmax);
      ctx.fillStyle = inkOn([lut[s * 3], lut[s * 3 + 1], lut[s * 3 + 2]]);
      put(ctx, drawn, "cell", formatted(v, p.text), box.left + (c + 0.5) * cw, box.top + (r + 0.5) * rh, cw);
    }
  }
}

// Row labels right-aligned left of the panel: every one where they fit 1.1 fonts apart, else every k-th.
function drawRows(ctx, drawn, header, box, p) {
  const rh = (box.bottom - box.top) / p.shape[0];
  const step = Math.max(1, Math.ceil((header.size * 1.1) / rh));
  ctx.font = font(header, header.size);
  ctx.fillStyle = TEXT_DARK;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let r = 0; r < p.rows.length; r += step) put(ctx, drawn, "row", p.rows[r], box.left - 6, box.top + (r + 0.5) * rh);
}

// A bottom axis of column numbers (and its title) under the panel.
function drawColumns(ctx, drawn, header, box, p) {
  const cols = p.shape[1];
  const cw = (box.right - box.left) / cols;
  ctx.font = font(header, header.size);
  ctx.fillStyle = TEXT_DARK;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const count = Math.max(2, Math.floor((box.right - box.left) / (header.size * 4)));
  for (const t of niceTicks(0, cols - 1, count)) put(ctx, drawn, "tick", String(t), box.left + (t + 0.5) * cw, box.bottom + 4);
  if (p.xtitle) put(ctx, drawn, "axis", p.xtitle, (box.left + box.right) / 2, box.bottom + 6 + header.size * 1.4);
}

function drawBar(ctx, drawn, header, plot, p, lut) {
  const { size } = header;
  const { thickness, len, y, title } = p.bar;
  const left = plot.x0 + plot.w * (1 + BAR_GAP);
  const height = len * plot.h;
  const top = plot.y0 + (1 - y) * plot.h - height / 2;
  for (let i = 0; i < height; i++) {
    const c = Math.round((1 - i / Math.max(1, height - 1)) * (LUT - 1)) * 3;
    ctx.fillStyle = `rgb(${lut[c]},${lut[c + 1]},${lut[c + 2]})`;
    ctx.fillRect(left, top + i, thickness, 1.5);
  }
  ctx.font = font(header, size);
  ctx.fillStyle = TEXT_DARK;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  let widest = 0;
  for (const t of niceTicks(p.zmin, p.zmax, 5)) {
    const at = top + height * (1 - (t - p.zmin) / Math.max(p.zmax - p.zmin, 1e-30));
    ctx.fillRect(left + thickness, at - 0.5, 4, 1);
    put(ctx, drawn, "tick", tickText(t), left + thickness + 6, at);
    widest = Math.max(widest, ctx.measureText(tickText(t)).width);
  }
  if (!title) return;
  ctx.save();
  ctx.translate(left + thickness + 6 + widest + size * 0.4, top + height / 2);
  ctx.rotate(Math.PI / 2);
  ctx.textAlign = "center";
  ctx.textBaseline = "bottom";
  ctx.fillText(title, 0, 0);
  ctx.restore();
}

// A panel title (a paper note): its lines upwards from its anchor at the panel's top, or downwards.
function drawNote(ctx, drawn, header, plot, n) {
  const x = plot.x0 + n.x * plot.w;
  const y = plot.y0 + (1 - n.y) * plot.h;
  const line = n.size * 1.3;
  ctx.font = font(header, n.size);
  ctx.fillStyle = TEXT_DARK;
  ctx.textAlign = n.xanchor === "left" ? "left" : n.xanchor === "right" ? "right" : "center";
  ctx.textBaseline = "alphabetic";
  const first = n.yanchor === "bottom" ? y - 5 - (n.lines.length - 1) * line - n.size * 0.25 : y + n.size;
  n.lines.forEach((text, i) => put(ctx, drawn, "note", text, x, first + i * line));
}

// The whole figure at width W into a context whose scale is set (the screen's pixel ratio, or PNG_SCALE); where
// each text landed goes into `drawn` when given.
export function drawPanels(ctx, shown, W, luts, drawn = null) {
  const { header, values } = shown;
  const plot = layoutPanels(header, W, (text, px) => {
    ctx.font = font(header, px);
    return ctx.measureText(text).width;
  });
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, W, header.height);
  ctx.fillStyle = TEXT_DARK;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  let y = 10;
  ctx.font = font(header, header.titleSize);
  for (const text of header.title) {
    put(ctx, drawn, "title", text, 10, y);
    y += header.titleSize * 1.3;
  }
  y += header.subSize * 0.35;
  ctx.font = font(header, header.subSize);
  ctx.fillStyle = SUB_COLOUR;
  for (const text of header.subtitle) {
    put(ctx, drawn, "subtitle", text, 10, y);
    y += header.subSize * 1.3;
  }
  header.panels.forEach((p, i) => {
    const box = plot.boxes[i];
    drawCells(ctx, box, p, values[i], luts[i]);
    if (p.text) drawPrinted(ctx, drawn, header, box, p, values[i], luts[i]);
    if (p.ticks) drawRows(ctx, drawn, header, box, p);
    if (p.xticks) drawColumns(ctx, drawn, header, box, p);
    if (p.bar) drawBar(ctx, drawn, header, plot, p, luts[i]);
  });
  for (const s of header.shapes) {
    const box = plot.boxes[s.panel];
    const [rows, cols] = header.panels[s.panel].shape;
    const cw = (box.right - box.left) / cols;
    const rh = (box.bottom - box.top) / rows;
    ctx.strokeStyle = `rgb(${s.color.join(",")})`;
    ctx.lineWidth = s.width;
    ctx.strokeRect(box.left + (s.x0 + 0.5) * cw, box.top + (s.y0 + 0.5) * rh, (s.x1 - s.x0) * cw, (s.y1 - s.y0) * rh);
  }
  for (const n of header.notes) drawNote(ctx, drawn, header, plot, n);
  return plot;
}

// ------------------------------------------------------------------------------------------------ the view
class PanelsView extends Part {
  constructor(parent) {
    super(parent, "pn");
    this.stamp = new Stamp(this.root, this.hooks);
    const { bar, buttons } = toolbar([], { PNG: "Save this chart as a PNG for slides (3×)" });
    this.png = buttons.PNG;
    this.stage = el("div", "pn-stage");
    this.canvas = el("canvas", "pn-canvas");
    this.canvas.setAttribute("role", "img");
    this.tip = el("div", "pn-tip");
    this.tip.hidden = true;
    this.stage.append(this.canvas, this.tip);
    this.root.append(bar, this.stage);
    Object.assign(this, { shown: null, bytes: null, plot: null, width: 0 });
    this.hooks.listen(this.png, "click", () => this.savePng());
    this.hooks.listen(this.canvas, "pointermove", (e) => this.hover(e));
    this.hooks.listen(this.canvas, "pointerdown", (e) => this.hover(e)); // a tap on a touch screen reads a cell too
    // A finger leaves the screen after each tap: its read-out stays until the next tap or the pointer's next move.
    this.hooks.listen(this.canvas, "pointerleave", (e) => {
      if (e.pointerType !== "touch") this.tip.hidden = true;
    });
    this.hooks.resized(this.stage, () => this.fit());
  }

  receive(data) {
    const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
    if (sameBytes(this.bytes, bytes)) return; // the same chart again (another part of the page reran)
    this.bytes = bytes;
    const shown = decodePanels(bytes);
    this.shown = shown;
    this.luts = shown.header.panels.map((p) => palette(p.scale));
    this.root.dataset.name = shown.header.name;
    // what a screen reader says of the picture (role img): its title and subtitle, as text
    this.canvas.setAttribute("aria-label", [...shown.header.title, ...shown.header.subtitle].join(" "));
    this.tip.style.fontSize = `${shown.header.size}px`;
    this.width = 0;
    this.fit();
  }

  fit() {
    if (!this.shown) return;
    const W = Math.max(this.shown.header.minPx, Math.floor(this.stage.clientWidth));
    if (W === this.width || W <= 0) return;
    this.width = W;
    const H = this.shown.header.height;
    const dpr = fitCanvas(this.canvas, W, H);
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.root.drawn = [];
    this.plot = drawPanels(ctx, this.shown, W, this.luts, this.root.drawn);
    this.root.dataset.boxes = JSON.stringify(this.plot.boxes.map((b) => [b.left, b.top, b.right, b.bottom]));
    this.tip.hidden = true;
    this.stamp.drawn();
  }

  hover(e) {
    if (!this.plot) return;
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    const y = e.clientY - r.top;
    const { header, values } = this.shown;
    for (let i = header.panels.length - 1; i >= 0; i--) {
      const p = header.panels[i];
      const cell = cellAt(this.plot.boxes[i], p.shape, x, y);
      if (!cell) continue;
      const v = values[i][cell.row * p.shape[1] + cell.col];
      setText(this.tip, Number.isNaN(v) ? `${p.rows[cell.row]}: outside the window (−∞ before the softmax)`
        : filled(p.hover, cell.col, p.rows[cell.row], v));
      this.tip.hidden = false;
      const room = this.stage.clientWidth;
      const left = Math.min(x + 14, Math.max(0, room - this.tip.offsetWidth - 4));
      Object.assign(this.tip.style, { left: `${left}px`, top: `${y + 16}px` });
      return;
    }
    this.tip.hidden = true;
  }

  savePng() {
    if (!this.shown) return;
    const W = this.width || this.shown.header.minPx;
    const ctx = exportCanvas(W, this.shown.header.height);
    drawPanels(ctx, this.shown, W, this.luts);
    savePng(ctx.canvas, this.root, `${this.shown.header.name}.png`);
  }
}

export default function (args) {
  return mount(args, PanelsView);
}
