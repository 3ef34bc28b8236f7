// The lesson player's keys (issue 21, ui/player.py): what a presentation clicker sends, caught on the app's page.
// → PageDown and Space go to the next slide, ← and PageUp to the previous one. A key is left alone while the user
// types or works a widget that uses it (a text box, a slider, a radio group, a list), when a modifier is held
// (Alt+← is the browser's Back), and when someone else has already handled it. The component sends the slide to
// open, not a step: two presses before the app has answered still count twice, and two copies of the component
// (a page switching) that both hear one press ask for the same slide.

export const FORWARD = ["ArrowRight", "PageDown", " "];
export const BACKWARD = ["ArrowLeft", "PageUp"];
// Elements that use these keys themselves: text entry, and widgets that move with arrows.
const TYPING = ["input", "textarea", "select", "[contenteditable]:not([contenteditable='false'])", "[role='slider']",
  "[role='radio']", "[role='radiogroup']", "[role='combobox']", "[role='listbox']", "[role='option']",
  "[role='tab']", "[role='menu']", "[role='menuitem']", "[role='spinbutton']", "[role='textbox']",
  "[role='grid']", "[role='treegrid']"].join(", ");
// Elements that Space presses: a focused button keeps its own meaning of Space.
const PRESSABLE = "button, a[href], summary, label, [role='button'], [role='switch'], [role='checkbox']";
const PENDING_MS = 3000; // how long a sent slide wins over the app's older word on where the lesson is

// +1 (next), -1 (previous) or 0 (not the player's) for a keydown event. Elements are read along the event's
// composed path, so a text box inside another component's shadow root counts as typing too.
export function step(e) {
  if (e.defaultPrevented || e.isComposing || e.repeat || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return 0;
  const d = FORWARD.includes(e.key) ? 1 : BACKWARD.includes(e.key) ? -1 : 0;
  if (!d) return 0;
  const path = (e.composedPath ? e.composedPath() : [e.target]).filter((n) => n && typeof n.matches === "function");
  if (path.some((n) => n.matches(TYPING) || n.isContentEditable)) return 0;
  if (e.key === " " && path.some((n) => n.matches(PRESSABLE))) return 0;
  return d;
}

// The slide a step leads to, within 1..count; the same slide at either end.
export const target = (at, d, count) => Math.min(Math.max(at + d, 1), Math.max(count, 1));

// Where keydown events of the whole page can be heard: the document this component is drawn in (a
// st.components.v2 component is part of the app's own page, not a frame), or null.
export function pageOf(parent) {
  try {
    const doc = parent.ownerDocument;
    return doc && typeof doc.addEventListener === "function" ? doc : null;
  } catch {
    return null; // a frame of another origin
  }
}

class Keys {
  constructor(parent) {
    this.root = el("div", "ee lk");
    parent.appendChild(this.root);
    this.hooks = new Hooks();
    Object.assign(this, { at: 0, count: 0, pending: null, send: () => {} });
    const doc = pageOf(parent);
    if (doc) {
      this.hooks.listen(doc, "keydown", (e) => this.key(e));
      this.root.dataset.listening = "page";
    } else {
      // Keys pressed elsewhere never reach us: listen here, and say so.
      this.root.tabIndex = 0;
      this.root.append(el("span", "lk-hint", "Click here first: the page does not pass its keys to the lesson."));
      this.hooks.listen(this.root, "keydown", (e) => this.key(e));
      this.root.dataset.listening = "here";
    }
  }

  // The app's word: {slide, count}. A slide just sent wins for a moment over an older answer.
  receive(data) {
    const { slide, count } = typeof data === "string" ? JSON.parse(data) : data;
    this.count = count;
    const waiting = this.pending && performance.now() - this.pending.since < PENDING_MS && slide !== this.pending.to;
    if (!waiting) {
      this.at = slide;
      this.pending = null;
    }
    this.root.dataset.slide = String(this.at);
  }

  key(e) {
    const d = step(e);
    if (!d || !this.count) return;
    e.preventDefault(); // Space and PageDown would scroll the page as well
    const to = target(this.at, d, this.count);
    if (to === this.at) return;
    this.at = to;
    this.pending = { to, since: performance.now() };
    this.root.dataset.slide = String(to);
    this.send("go", { to });
  }

  destroy() {
    this.hooks.end();
    this.root.remove();
  }
}

export default (component) => mount(component, Keys);
