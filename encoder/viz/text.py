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


def fit_label(text: str, max_px: float, size: float, bold: bool = False) -> str:
    """label(text) shortened (with "…") until its rough width at font `size` is at most max_px."""
    widen = 1.1 if bold else 1.0  # a bold face is about a tenth wider
    shown = printable(text)
    limit = len(shown)
    while limit > 1 and text_px(printable(shown, limit), size) * widen > max_px:
        limit -= 1
    return label(shown, limit)
