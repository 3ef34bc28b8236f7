"""Hostile lesson files and links (issue 21): what a class may upload, paste or receive, as (id, content).

Each one must give one clear sentence (a ValueError from the parser, or notes on what was repaired) and nothing else
raised; tests/app/test_lessons.py checks them. Notes that must stay literal (HTML, Markdown, RTL overrides, a
10,000-character word) are in LITERAL_NOTES.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from devkit.hostile_inputs import HOSTILE

FORMAT = "encoder-explorer-lesson"


def lesson(*slides: Any, **top: Any) -> dict[str, Any]:
    return {"format": FORMAT, "version": 1, "title": "Hostile"} | top | {"slides": list(slides)}


def slide(**fields: Any) -> dict[str, Any]:
    return {"title": "A slide", "page": "heatmaps", "points": ["A point."]} | fields


def text(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def packed(data: bytes) -> str:
    return "~" + base64.urlsafe_b64encode(zlib.compress(data, 9)).decode("ascii").rstrip("=")


LITERAL_NOTES = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)> & &amp; <b>bold</b>",
    "**bold** _it_ [link](javascript:alert(1)) `code` # heading\n- item\n> quote",
    "\u202eevil override\u202c and \u2066isolate\u2069 and a plain RTL word שלום",
    "x" * 10_000,
    "$$x^2$$ :smile: {{template}} ${js} %s %(name)s",
    "line one\nline two\ttabbed\r\nwindows\x00nul",
]

# Each entry: (id, file content). "refused" entries must raise ValueError; the others parse with notes.
FILES: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not_json", b"{"),
    ("json_list", b"[]"),
    ("json_string", b'"lesson"'),
    ("json_null", b"null"),
    ("no_format", text({"version": 1, "title": "x", "slides": []})),
    ("other_format", text({"format": "powerpoint", "version": 1, "slides": []})),
    ("no_version", text({"format": FORMAT, "title": "x", "slides": []})),
    ("version_text", text(lesson() | {"version": "1"})),
    ("version_bool", text(lesson() | {"version": True})),
    ("version_2", text(lesson() | {"version": 2})),
    ("version_huge", b'{"format": "encoder-explorer-lesson", "version": 1' + b"0" * 5000 + b', "slides": []}'),
    ("too_many_slides", text(lesson(*[slide() for _ in range(61)]))),
    ("too_large", text(lesson(slide(), description="d" * 210_000))),
    ("deep_nesting", b"[" * 100_000 + b"]" * 100_000),
    ("deep_nesting_in_query", text(lesson())[:-2] + b'{"query": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}"),
    ("invalid_utf8", b'{"format": "encoder-explorer-lesson", "title": "\xff\xfe"}'),
    ("utf16", text(lesson(slide())).decode("utf-8").encode("utf-16")),
    ("slides_not_list", text(lesson() | {"slides": {"0": slide()}})),
    ("slide_not_object", text(lesson(42, "slide", None, [slide()]))),
    ("unknown_page", text(lesson(slide(page="../../etc/passwd"), slide()))),
    ("page_not_text", text(lesson(slide(page=3), slide()))),
    ("only_unknown_pages", text(lesson(slide(page="nope")))),
    ("query_not_object", text(lesson(slide(query=["layer", 3])))),
    ("bad_settings", text(lesson(slide(query={
        "layer": "abc", "head": 99, "model": "ckpt:../../etc", "view": "<script>", "d_model": 1e999,
        "dropout": "NaN", "text": "t" * 6_000, "list": [1, 2], "nested": {"a": 1}, "present": True, "no_such": "x",
        "<b>": "markup key", "seed": -1, "scale": None,
    })))),
    ("text_fields_not_text", text(lesson(slide(title=7, points=[1, None, {"text": ["x"]}], question="why?"), title=5,
                                         description={"x": 1}))),
    ("huge_title", text(lesson(slide(title="T" * 10_000), title="L" * 10_000))),
    ("ten_points", text(lesson(slide(points=[f"Point {i}." for i in range(10)])))),
    ("sixty_thousand_points", text(lesson(slide(points=[0] * 60_000)))),
    ("empty_points", text(lesson(slide(points=["", "   ", {"text": ""}, {}])))),
    ("point_too_long", text(lesson(slide(points=["p" * 25_000])))),
    ("bad_checks", text(lesson(slide(points=[
        {"text": "It is 0.68 here.", "checks": [
            {"claim": "no_such_claim", "shows": "0.68"},
            {"claim": "weight", "shows": "0.99"},
            {"claim": "weight", "args": {"query": "it", "key": "animal", "extra": 1}, "shows": "0.68"},
            {"claim": "weight", "args": {"query": ["it"]}, "shows": "0.68"},
            {"claim": "weight"},
            {"claim": "weight", "shows": "0.68", "below": "1"},
            {"claim": "row_sum_gap", "below": "here"},
            {"claim": "weight", "shows": True},
            "weight",
        ]},
        {"text": "Checks as text.", "checks": "d_model"},
    ])))),
    ("bad_questions", text(lesson(slide(question={"answer": "no ask"}), slide(question={"ask": "Why?", "x": 1}),
                                  slide(question=["ask"])))),
    ("lone_surrogates", b'{"format": "encoder-explorer-lesson", "version": 1, "title": "\\ud800 half", "slides": '
                        b'[{"title": "\\udfff", "page": "heatmaps", "points": ["\\ud83d alone"]}]}'),
    ("nan_and_infinity", b'{"format": "encoder-explorer-lesson", "version": 1, "title": "x", "slides": '
                         b'[{"page": "heatmaps", "query": {"layer": NaN, "head": Infinity, "dropout": -Infinity}}]}'),
    ("duplicate_keys", b'{"format": "encoder-explorer-lesson", "version": 1, "version": 1, "title": "a", "title": "b", '
                       b'"slides": []}'),
    ("nulls_everywhere", text({"format": FORMAT, "version": 1, "title": None, "description": None, "slides": [
        {"title": None, "page": None, "query": None, "points": None, "question": None}]})),
    ("unknown_fields", text(lesson(slide(theme="dark", onload="alert(1)"), author="<b>me</b>"))),
    ("bom_prefixed", b"\xef\xbb\xbf" + text(lesson(slide()))),
    ("literal_notes", text(lesson(slide(title=LITERAL_NOTES[0], points=LITERAL_NOTES[:4],
                                        question={"ask": LITERAL_NOTES[4], "answer": LITERAL_NOTES[5]}),
                                  slide(points=LITERAL_NOTES[6:]), title=LITERAL_NOTES[2]))),
    ("hostile_sentences", text(lesson(*[slide(query={"text": t}, points=[t or "empty"]) for _, t in HOSTILE[:40]]))),
]

# Share links: (id, link). Each must raise ValueError with one sentence or parse like a file.
_BOMB = packed(b" " * 20_000_000)  # 20 MB of spaces in a 26,000-character link: inflating must stop at 200 kB
_VALID = packed(text(lesson(slide())))
LINKS: list[tuple[str, str]] = [
    ("empty", ""),
    ("no_prefix", "eJxLTEoGAAJNASc"),
    ("prefix_only", "~"),
    ("bad_alphabet", "~abc$def/ghi"),
    ("not_base64", "~a"),
    ("not_zlib", "~" + base64.urlsafe_b64encode(b"not deflated at all").decode().rstrip("=")),
    ("truncated", _VALID[: len(_VALID) // 2]),
    ("zip_bomb", _BOMB),
    ("too_long", "~" + "A" * 40_000),
    ("not_a_lesson", packed(b'{"hello": "world"}')),
    ("binary_inside", packed(bytes(range(256)))),
    ("url_without_lesson", "https://class.example.org/heatmaps?layer=3"),
    ("url_with_lesson", "https://class.example.org/?lesson=" + _VALID + "&slide=2"),
    ("trailing_garbage", _VALID + "AAAA"),
]
