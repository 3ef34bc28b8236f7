"""Hostile sentences (issue 6, point 1): what a class pastes into the box, as a list of (id, text).

Shared by the encoder, AppTest and browser tests: `pytest.mark.parametrize("text", TEXTS, ids=IDS)`.
Every entry must give a valid trace (or, for EMPTY_IDS, the friendly prompt), render on every page without an
exception element, and show up literally: never as HTML, Markdown or a broken Graphviz DOT source.
Lone surrogates are left out on purpose: they are not valid UTF-8, and a browser sends them as U+FFFD.
"""

from __future__ import annotations

_PARAGRAPH = (
    "Attention lets every token look at every other token in the sentence. The encoder stacks identical layers, "
    "each with multi-head self-attention and a position-wise feed-forward network, wrapped in residual "
    "connections and layer normalisation. "
)
LONG_PARAGRAPH = (_PARAGRAPH * (20_000 // len(_PARAGRAPH) + 1))[:20_000]  # four times the app's cap: cut with a message

HOSTILE: list[tuple[str, str]] = [
    # empty and blank
    ("empty", ""),
    ("whitespace", " \t\n  \u00a0\u2003\u3000 "),
    ("newlines_only", "\n" * 200),
    # size
    ("paragraph_20k", LONG_PARAGRAPH),
    ("word_200_chars", "supercalifragilistic" * 10),
    ("word_10k_chars", "x" * 10_000),
    ("repeated_600_tokens", " ".join(["the"] * 600)),
    ("many_lines", "\n".join(f"line {i}" for i in range(300))),
    # punctuation and symbols
    ("punctuation_only", "!?.,;:'\"()[]{}<>/\\|@#$%^&*-_=+~`"),
    ("numbers", "3.14159 1e10 -0 NaN Infinity 0x1F 1,000,000"),
    # emoji
    ("emoji_zwj", "👩‍👩‍👧‍👦 👨🏽‍💻 🏳️‍🌈 a family and a coder"),
    ("emoji_flags_only", "🇫🇷🇯🇵🇧🇷"),
    # scripts and direction
    ("rtl_hebrew", "שלום עולם"),
    ("rtl_arabic", "مرحبا بالعالم"),
    ("mixed_direction", "The word שלום means peace, and مرحبا means hello (123)."),
    ("cjk", "我爱自然语言处理。日本語のテキスト。한국어 문장입니다."),
    ("mixed_scripts", "Ελληνικά кириллица ไทย देवनागरी"),
    ("combining_marks", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇ and e\u0301 vs \u00e9"),
    # invisible and control characters
    ("nul", "before\x00after"),
    ("c0_controls", "bell\x07 back\x08 escape\x1b[31m red\x7f tab\tend"),
    ("bidi_override", "abc\u202edcba\u202c xyz"),
    ("bidi_isolates", "\u2066isolate\u2069 \u200frlm\u200e lrm"),
    ("zero_width", "zero\u200bwidth\u200c non\u200djoiner \ufeffbom"),
    ("noncharacters", "\uffff \ufffe \U0010ffff \ufffd"),
    # HTML
    ("script_tag", "<script>alert(1)</script>"),
    ("bold_tag", "<b>bold</b>"),
    ("img_onerror", "<img src=x onerror=alert(1)>"),
    ("html_entities", "&lt;b&gt; &amp; &#60;script&#62; &nbsp;"),
    ("style_tag", "<style>body{display:none}</style>hidden?"),
    # Markdown and LaTeX
    ("markdown_bold", "**x**"),
    ("markdown_js_link", "[a](javascript:alert(1))"),
    ("markdown_block", "# Heading\n\n- item\n> quote `code` ~~strike~~ :smile: <https://example.com>"),
    ("latex", "$$\\frac{1}{0}$$ and $x^2$ \\(y\\)"),
    # Graphviz DOT breakers
    ("dot_quotes", 'say "hello" to "graphviz"'),
    ("dot_backslashes", "back\\slash \\n \\l \\N \\G"),
    ("dot_trailing_backslash", "ends with a backslash\\"),
    ("dot_syntax", "} { ] [ ; -> -- digraph G { a -> b }"),
    ("dot_html_label", "<<table><tr><td>x</td></tr></table>>"),
    # other injections
    ("special_tokens", "[CLS] [SEP] [MASK] [PAD] [UNK] ##s"),
    ("templates", "{{7*7}} ${7*7} %s %d {0} {{"),
    ("sql_and_path", "'; DROP TABLE tokens; -- ../../etc/passwd"),
    ("url", "https://example.com/?a=1&b=<2>#frag"),
]

IDS = [name for name, _ in HOSTILE]
TEXTS = [text for _, text in HOSTILE]
BY_ID = dict(HOSTILE)
EMPTY_IDS = frozenset(name for name, text in HOSTILE if not text.strip())  # the app shows a prompt, not a trace
MARKUP_IDS = frozenset({"script_tag", "bold_tag", "img_onerror", "style_tag", "markdown_bold", "markdown_js_link"})

assert len(BY_ID) == len(HOSTILE) >= 30, "ids must be unique and the corpus at least 30 entries"
