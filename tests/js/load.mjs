// A component's module as ui/components.py registers it: ui/component_base.js, a newline, then the component's own
// file, evaluated as one ES module (a data: URL, so node needs no package.json and the app no build step).
import { readFileSync } from "node:fs";

const UI = new URL("../../ui/", import.meta.url);

export function joined(stem) {
  const names = stem ? ["component_base", stem] : ["component_base"];
  return names.map((n) => readFileSync(new URL(`${n}.js`, UI), "utf8")).join("\n");
}

export function load(stem) {
  return import(`data:text/javascript;base64,${Buffer.from(joined(stem)).toString("base64")}`);
}

// The payload as ui/payload.py encodes it: [uint32 LE n][header JSON][zeros to a multiple of 8][body][tail].
export function encode(header, body, tail = new Uint8Array(0)) {
  const head = new TextEncoder().encode(JSON.stringify(header));
  const start = Math.ceil((4 + head.length) / 8) * 8;
  const out = new Uint8Array(start + body.length + tail.length);
  new DataView(out.buffer).setUint32(0, head.length, true);
  out.set(head, 4);
  out.set(body, start);
  out.set(tail, start + body.length);
  return out;
}

export const bytesOf = (typed) => new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
