"""Rules the app's source keeps, checked by reading it: no user text can become HTML through Streamlit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_unsafe_allow_html_in_app_code():
    """Issue 6, point 7: no st.markdown(..., unsafe_allow_html=True) anywhere outside tests/."""
    skip = {"tests", ".venv", ".venv-test", ".git", "artifacts"}
    files = [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts)]
    assert any(p.name == "app.py" for p in files)
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "unsafe_allow_html=True" in line]
    assert not hits, f"unsafe_allow_html=True found: {hits}"
