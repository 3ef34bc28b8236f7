// ui/lesson_keys.js under node's test runner (joined with the base, as when registered): which keydowns move a
// lesson, and which are left to what the user is typing in or working. The listening itself runs in Chromium
// (tests/app/test_player_browser.py).
import assert from "node:assert/strict";
import { test } from "node:test";

import { load } from "./load.mjs";

const keys = await load("lesson_keys");

// A stand-in element: a tag and attributes, matching the simple selectors lesson_keys.js uses.
function element(tag, attrs = {}) {
  const has = (name, value) => name in attrs && (value === undefined || String(attrs[name]) === value);
  const one = (sel) => {
    const m = sel.match(/^([a-z]*)((?:\[[^\]]+\])*)(?::not\((\[[^\]]+\])\))?$/);
    if (!m) throw new Error(`selector not understood: ${sel}`);
    const [, name, tests, not] = m;
    const attrTest = (t) => {
      const [, a, v] = t.match(/^\[([a-z-]+)(?:='([^']*)')?\]$/);
      return has(a, v);
    };
    const parts = tests ? tests.match(/\[[^\]]+\]/g) : [];
    return (!name || name === tag) && parts.every(attrTest) && !(not && attrTest(not));
  };
  return { tag, matches: (list) => list.split(",").map((s) => s.trim()).some(one), isContentEditable: false };
}

const BODY = element("body");
function press(key, on = [BODY], extra = {}) {
  let prevented = false;
  const e = { key, composedPath: () => on, altKey: false, ctrlKey: false, metaKey: false, shiftKey: false,
    repeat: false, isComposing: false, defaultPrevented: false, preventDefault: () => (prevented = true), ...extra };
  return { d: keys.step(e), prevented: () => prevented };
}

test("a clicker's keys: → Page Down and Space forward, ← and Page Up back; others are not the player's", () => {
  for (const k of ["ArrowRight", "PageDown", " "]) assert.equal(press(k).d, 1, k);
  for (const k of ["ArrowLeft", "PageUp"]) assert.equal(press(k).d, -1, k);
  for (const k of ["ArrowUp", "ArrowDown", "Enter", "Home", "End", "a", "Escape", "Tab"]) assert.equal(press(k).d, 0, k);
});

test("typing and widgets that use the keys keep them, inside shadow roots too", () => {
  const inside = (tag, attrs) => [element(tag, attrs), element("div"), BODY];
  const typing = [["textarea"], ["input", { type: "text" }], ["select"], ["div", { contenteditable: "true" }],
    ["div", { contenteditable: "" }], ["div", { role: "slider" }], ["input", { role: "combobox" }],
    ["div", { role: "radio" }], ["div", { role: "listbox" }], ["div", { role: "tab" }], ["div", { role: "spinbutton" }]];
  for (const [tag, attrs] of typing) {
    for (const k of ["ArrowRight", "ArrowLeft", "PageDown", "PageUp", " "]) {
      assert.equal(press(k, inside(tag, attrs)).d, 0, `${k} in ${tag} ${JSON.stringify(attrs)}`);
    }
  }
  assert.equal(press("ArrowRight", inside("div", { contenteditable: "false" })).d, 1, "not editable");
  const editable = Object.assign(element("p"), { isContentEditable: true }); // editable through a parent
  assert.equal(press("ArrowRight", [editable, BODY]).d, 0);
});

test("Space on a focused button, link or summary is that element's; arrows on it still move the lesson", () => {
  for (const [tag, attrs] of [["button"], ["a", { href: "#" }], ["summary"], ["div", { role: "button" }]]) {
    const path = [element("span"), element(tag, attrs), BODY];
    assert.equal(press(" ", path).d, 0, tag);
    assert.equal(press("ArrowRight", path).d, 1, tag);
    assert.equal(press("PageUp", path).d, -1, tag);
  }
  assert.equal(press(" ", [element("a"), BODY]).d, 1, "an anchor without href is no link");
});

test("modifiers, repeats, IME composition and keys already handled are left alone", () => {
  for (const extra of [{ altKey: true }, { ctrlKey: true }, { metaKey: true }, { shiftKey: true }, { repeat: true },
    { isComposing: true }, { defaultPrevented: true }]) {
    assert.equal(press("ArrowRight", [BODY], extra).d, 0, JSON.stringify(extra));
  }
  assert.equal(press("ArrowRight", [BODY], { composedPath: undefined, target: BODY }).d, 1, "no composedPath");
});

test("the slide a step leads to stays within the lesson", () => {
  assert.equal(keys.target(1, 1, 6), 2);
  assert.equal(keys.target(6, 1, 6), 6);
  assert.equal(keys.target(1, -1, 6), 1);
  assert.equal(keys.target(4, -1, 6), 3);
  assert.equal(keys.target(9, -1, 6), 6, "a slide past the end comes back into the lesson");
  assert.equal(keys.target(1, 1, 0), 1);
});

test("the page's keys are heard on the document the component is drawn in, else nowhere", () => {
  const doc = { addEventListener() {} };
  assert.equal(keys.pageOf({ ownerDocument: doc }), doc);
  assert.equal(keys.pageOf({ ownerDocument: null }), null);
  assert.equal(keys.pageOf({ get ownerDocument() { throw new Error("cross-origin"); } }), null);
});

test("Follow: one request at a time; presses meanwhile count; a request never answered is given up", () => {
  let clock = 0;
  const sent = [];
  const f = new keys.Follow((name, value) => sent.push(`${name} ${value.to}`), () => clock);
  f.answer(1, 6);
  assert.equal(f.press(1), 2);
  assert.equal(f.press(1), 3, "a second press before the app answered the first");
  assert.deepEqual(sent, ["go 2"], "asked only once the first is drawn");
  f.answer(1, 6); // a run that had not seen the request
  assert.deepEqual(sent, ["go 2"]);
  assert.equal(f.at, 3);
  f.answer(2, 6); // the first is drawn: the second goes out
  assert.deepEqual(sent, ["go 2", "go 3"]);
  f.answer(3, 6);
  assert.deepEqual([f.at, f.app, f.asked], [3, 3, null]);
  assert.equal(f.press(-1), 2);
  f.answer(2, 6);
  f.answer(4, 6); // the app moved on its own (the Next button): the keys follow
  assert.equal(f.at, 4);
  assert.equal(f.press(1), 5);
  clock += 5000; // never answered: the next press starts from the app's slide
  assert.equal(f.press(1), 5);
  assert.deepEqual(sent.slice(-2), ["go 5", "go 5"]);
  f.answer(5, 6);
  assert.equal(f.press(1), 6);
  f.answer(6, 6);
  assert.equal(f.press(1), null, "no slide after the last");
  assert.equal(f.press(-1), 5);
  f.answer(6, 6); // not yet
  assert.equal(f.at, 5);
  clock += 5000;
  f.answer(6, 6); // a request given up: the app's word
  assert.equal(f.at, 6);
  f.answer(1, 0);
  assert.equal(f.press(1), null, "no lesson, nothing asked");
});
