// node decode_payload.mjs MODULE PAYLOAD...: each payload decoded by MODULE (a component's joined module, as
// ui/components.py registers it) into its Layers, printed as JSON: the header, every held layer's values
// (H x T x T, as the views read them) and the tail as float32. For tests/js/test_components.py.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { heldValues } from "./held.mjs";

const [module, ...files] = process.argv.slice(2);
const m = await import(pathToFileURL(module).href);
const out = [];
for (const file of files) {
  const decoded = m.decode(new Uint8Array(readFileSync(file)));
  const { header } = decoded;
  const { layers, values } = await heldValues(m, decoded);
  out.push({ header, values, tail: [...m.aligned(decoded.tail, Float32Array)], held: layers.list() });
}
process.stdout.write(JSON.stringify(out));
