// A link to share, with a Copy button (issue 21, ui/authoring.py: the Lessons page's "Link to this lesson"). It
// replaces st.code, whose syntax highlighter Streamlit loads on first use: a fifth of the Lessons page's main-thread
// work on a first visit (benchmarks/page_load.py). The link goes into a read-only box's value (text, never markup);
// Copy puts it on the clipboard, or selects it where the page may not write there (an address that is neither https
// nor this machine), and the status line says which.

// "copied" when the text reached the clipboard, else "selected" (the fallback selected it for Ctrl+C): the
// asynchronous clipboard first, then the fallback, whose own copy may still succeed (execCommand on plain http).
export async function copyText(text, clipboard, fallback) {
  if (clipboard && typeof clipboard.writeText === "function") {
    try {
      await clipboard.writeText(text);
      return "copied";
    } catch {
      // not allowed here (no focus, no permission, not a secure context): select it instead
    }
  }
  return fallback() ? "copied" : "selected";
}

export const SAID = {
  copied: "Copied. Paste it anywhere.",
  selected: "Selected: press Ctrl+C (⌘C on a Mac) to copy it.",
};

class CopyLink extends Part {
  constructor(parent) {
    super(parent, "cl");
    this.copies = 0;
    this.box = el("input", "cl-box");
    Object.assign(this.box, { type: "text", readOnly: true, spellcheck: false });
    this.button = el("button", "ee-btn cl-btn", "Copy link");
    this.status = statusLine("cl-status");
    const row = el("div", "cl-row");
    row.append(this.box, this.button);
    this.root.append(row, this.status);
    this.hooks.listen(this.box, "focus", () => this.box.select());
    this.hooks.listen(this.button, "click", () => this.copy());
  }

  receive(data) {
    const { link, label } = given(data);
    this.box.setAttribute("aria-label", label || "Link");
    if (this.box.value !== link) {
      this.box.value = link; // a value, never markup
      this.status.textContent = "";
      delete this.root.dataset.copied;
    }
  }

  async copy() {
    const how = await copyText(this.box.value, navigator.clipboard, () => {
      this.box.focus();
      this.box.select();
      try {
        return document.execCommand("copy");
      } catch {
        return false;
      }
    });
    this.root.dataset.copied = how;
    this.root.dataset.copies = String((this.copies += 1)); // tests wait for the count: a click's own answer
    setText(this.status, SAID[how]);
  }
}

export default (component) => mount(component, CopyLink);
