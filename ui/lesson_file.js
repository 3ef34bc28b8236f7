// Open a lesson file (issue 21, ui/authoring.py): the browser reads the file and sends its bytes to the app over
// the page's own connection. Streamlit's upload endpoint is not used: nginx refuses it in deployment
// (deploy/nginx.conf.template) and it is capped at 1 MB. A file over the cap is not read at all; the app is only told
// its name and size, so the refusal is said in the app's words. Names are shown as text only.

export const MAX_BYTES = 200_000; // ui/lessons/format.py MAX_BYTES: the largest lesson file

// Bytes as base64 (what the app's trigger value can carry), in slices small enough for String.fromCharCode.
export function base64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

// What is sent for a picked file: its bytes, or only its name and size when it is over the cap.
export async function message(file, n, max = MAX_BYTES) {
  const about = { name: String(file.name).slice(0, 200), size: file.size, n };
  if (file.size > max) return { ...about, refused: "too large" };
  return { ...about, data: base64(new Uint8Array(await file.arrayBuffer())) };
}

class FileOpen extends Part {
  constructor(parent) {
    super(parent, "lf");
    this.n = 0;
    this.input = el("input", "lf-input");
    Object.assign(this.input, { type: "file", accept: ".json,application/json" });
    this.button = el("button", "ee-btn lf-btn", "Open a lesson file…");
    this.status = statusLine("lf-status");
    this.root.append(this.input, this.button, this.status);
    this.hooks.listen(this.button, "click", () => this.input.click());
    this.hooks.listen(this.input, "change", () => this.picked());
  }

  receive(data) {
    const { label } = given(data);
    if (label) this.button.textContent = label;
  }

  async picked() {
    const file = this.input.files && this.input.files[0];
    if (!file) return;
    this.input.value = ""; // the same file picked again is read again
    this.status.textContent = `Reading “${file.name}”…`;
    const sent = await message(file, (this.n += 1));
    this.status.textContent = "";
    this.root.dataset.sent = String(sent.n);
    this.send("file", sent);
  }
}

export default (component) => mount(component, FileOpen);
