// The layers a payload brings, as a component holds them: decoded by the component's joined module `m` (its Layers
// and valueAt), awaited until every deflated layer has landed; returns the Layers and every held layer's values
// (H x T x T, as the views read them). Shared by decode_payload.mjs and decode_map.mjs.
export async function heldValues(m, decoded) {
  const h = decoded.header;
  const layers = new m.Layers();
  const landed = new Promise((resolve) => {
    let left = h.layers.length;
    layers.onArrive = () => (left -= 1) || resolve();
    if (!h.zipped || !left) resolve();
  });
  layers.take(decoded);
  await landed;
  const values = {};
  for (const layer of h.layers) {
    values[layer] = [];
    for (let head = 0; head < h.H; head++) {
      const plane = layers.plane(layer, head);
      for (let x = 0; x < h.T * h.T; x++) values[layer].push(m.valueAt(plane, x));
    }
  }
  return { layers, values };
}
