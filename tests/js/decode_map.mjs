// node decode_map.mjs MODULE PAYLOAD: the attention map's payload (ui/heatmap.py `data`) read by MODULE (ui/heatmap.js
// joined with the base, as registered), printed as JSON: the header, every stack's held layers (values as the map
// reads them) and the exact part's key and printed decimals. For tests/js/test_components.py.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { heldValues } from "./held.mjs";

const [module, file] = process.argv.slice(2);
const m = await import(pathToFileURL(module).href);
const { header, stacks, exact } = m.unpack(new Uint8Array(readFileSync(file)));
const out = { header, stacks: {}, exact: null };
for (const { key, payload } of stacks) {
  const h = payload.header;
  const { layers, values } = await heldValues(m, payload);
  out.stacks[key] = { id: layers.id, held: layers.list(), H: h.H, values, half: layers.halfStep(h.layers[0] ?? 0) };
}
if (exact) {
  const { header: x, chunks } = m.decode(exact.bytes);
  const digits = m.fromPlanes(await m.inflate(chunks[0]), x.K * x.K);
  out.exact = { key: x.key, K: x.K, text: [...digits].map(m.digitText) };
}
process.stdout.write(JSON.stringify(out));
