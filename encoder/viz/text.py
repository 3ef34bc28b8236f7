"""User text made safe for every renderer (plotly labels, Graphviz, Streamlit widgets) and measured for layouts.

User text reaches a figure only through `printable()` (control characters visible, bidi overrides neutralised) and,
for plotly, `label()`: plotly renders tags such as <b>, <br> and <a> in titles, ticks and hover text, so '<', '>'
and '&' become entities, which it shows literally.
"""

from __future__ import annotations

import html
import unicodedata


def printable(text: str, limit: int | None = None) -> str:
    """Text with control characters shown as symbols and bidi overrides neutralised, optionally shortened."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 32:
            out.append(chr(0x2400 + code))  # the Unicode "control picture" for C0 characters, e.g. ␀
        elif code == 127 or unicodedata.category(ch) == "Cc" or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append("\ufffd")
        else:
            out.append(ch)
    text = "".join(out)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def label(text: str, limit: int = 24) -> str:
    """User text made safe for any plotly label: control characters visible, shortened, '<', '>', '&' escaped."""
    return html.escape(printable(text, limit), quote=False)


def text_px(text: str, size: float) -> float:
    """Rough rendered width of a label: wide (CJK, emoji) characters count a full em, others ~0.62 em."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else 0.62 * size for c in html.unescape(text))


# Advance widths (em) of the figures' font, Helvetica or Arial (Liberation Sans on Linux shares their metrics),
# measured in Chromium: ASCII, and the symbols the figures write that are wider than ARIAL_OTHER, which every other
# character counts.
_ARIAL_WIDTHS = {"'": 0.191, "ijl": 0.222, "|": 0.26, " !,./:;I[\\]ft": 0.278, "()-`r{}": 0.334, '"': 0.355, "*": 0.389,
                 "^": 0.469, "Jcksvxyz": 0.5, "0123456789#$?L_abdeghnopqu": 0.556, "+<=>~": 0.584, "FTZ": 0.611,
                 "&ABEKPSVXY": 0.667, "CDHNRUw": 0.722, "GOQ": 0.778, "Mm": 0.833, "%": 0.889, "W": 0.944, "@": 1.015,
                 "…—→←": 1.0}
ARIAL = {c: w for chars, w in _ARIAL_WIDTHS.items() for c in chars}
ARIAL_OTHER = 0.62
# A browser without any of them draws DejaVu Sans, 13 % wider on prose (measured): lines keep that much room.
PROSE_SPARE = 1.15


def prose_px(text: str, size: float) -> float:
    """Width of a line of prose at font `size`, from each character's own width in the figures' font, with room for
    the widest fallback font. text_px counts 0.62 em for every character, right for digits and short labels; for
    prose it is ~40 % too wide, so lines broken by it to a chart's real width filled about two thirds of it."""
    return size * sum(1.0 if unicodedata.east_asian_width(c) in "WF" else PROSE_SPARE * ARIAL.get(c, ARIAL_OTHER)
                      for c in html.unescape(text))  # wide characters: a full em in every font


def fit_label(text: str, max_px: float, size: float, bold: bool = False) -> str:
    """label(text) shortened (with "…") until its rough width at font `size` is at most max_px."""
    widen = 1.1 if bold else 1.0  # a bold face is about a tenth wider
    shown = printable(text)
    limit = len(shown)
    while limit > 1 and text_px(printable(shown, limit), size) * widen > max_px:
        limit -= 1
    return label(shown, limit)
