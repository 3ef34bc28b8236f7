// The lesson player's keys (issue 21, ui/player.py): what a presentation clicker sends, caught on the app's page.
// → PageDown and Space go to the next slide, ← and PageUp to the previous one. A key is left alone while the user
// types or works a widget that uses it (a text box, a slider, a radio group, a list), when a modifier is held
// (Alt+← is the browser's Back), and when someone else has already handled it. The component asks for the slide to
// open, not a step (Follow): presses before the app has answered still count, and two copies of the component (a
// page switching) that both hear one press ask for the same slide.

export const FORWARD = ["ArrowRight", "PageDown", " "];
export const BACKWARD = ["ArrowLeft", "PageUp"];
// Elements that use these keys themselves: text entry, and widgets that move with arrows.
const TYPING = ["input", "textarea", "select", "[contenteditable]:not([contenteditable='false'])", "[role='slider']",
  "[role='radio']", "[role='radiogroup']", "[role='combobox']", "[role='listbox']", "[role='option']",
  "[role='tab']", "[role='menu']", "[role='menuitem']", "[role='spinbutton']", "[role='textbox']",
  "[role='grid']", "[role='treegrid']"].join(", ");
// Elements that Space presses: a focused button keeps its own meaning of Space.
const PRESSABLE = "button, a[href], summary, label, [role='button'], [role='switch'], [role='checkbox']";
const PENDING_MS = 4000; // how long the app may take to draw a slide asked for (the frame draws the bar first)

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

// Where the lesson is, as this page knows it: the slide the app last drew (app), and the one the presses so far lead
// to (at). The app is asked for one slide at a time, and only once it has drawn the one asked for before: a request
// that reaches the server while a run is switching pages can be dropped there, or send the browser back to the old
// page. Presses made meanwhile count: the slide they lead to is asked for next. A request the app never answers is
// given up after PENDING_MS, and the next press starts from the app's slide.
export class Follow {
  constructor(send, now = () => performance.now()) {
    Object.assign(this, { send, now, at: 0, app: 0, count: 0, asked: null });
  }

  // The app's word: the slide it drew and how many there are.
  answer(slide, count) {
    Object.assign(this, { app: slide, count });
    const asked = this.asked;
    if (asked && slide !== asked.to && !this.late(asked)) return; // drawn by a run that has not seen the request
    this.asked = null;
    if (asked && slide === asked.to && this.at !== slide) this.ask(this.at); // presses made meanwhile
    else this.at = slide;
  }

  // A step (+1 or -1): the slide it leads to, or null at either end of the lesson.
  press(d) {
    if (this.asked && this.late(this.asked)) Object.assign(this, { asked: null, at: this.app });
    const to = target(this.at, d, this.count);
    if (!this.count || to === this.at) return null;
    this.at = to;
    if (!this.asked) this.ask(to);
    return to;
  }

  ask(to) {
    this.asked = { to, since: this.now() };
    this.send("go", { to });
  }

  late(asked) {
    return this.now() - asked.since >= PENDING_MS;
  }
}

class Keys extends Part {
  constructor(parent) {
    super(parent, "lk");
    this.follow = new Follow((name, value) => this.send(name, value));
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

  receive(data) {
    const { slide, count } = given(data);
    this.follow.answer(slide, count);
    this.root.dataset.slide = String(this.follow.at);
  }

  key(e) {
    const d = step(e);
    if (!d || !this.follow.count) return;
    e.preventDefault(); // Space and Page Down would scroll the page as well
    if (this.follow.press(d) !== null) this.root.dataset.slide = String(this.follow.at);
  }
}

export default (component) => mount(component, Keys);
