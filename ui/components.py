"""The app's own browser components, each registered with the shared base joined before its own code.

ui/component_base.js (payload decoding, inflating, text-only DOM helpers, export, mount and cleanup) and
ui/component_base.css are joined with a component's ui/<stem>.js and ui/<stem>.css into one ES module and one
style sheet when the component is registered: no build step, nothing fetched at run time. tests/js loads the same
join under node's test runner.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

HERE = Path(__file__).parent
BASE = "component_base"


def joined(stem: str, ext: str) -> str:
    """The base's file and the component's file of one kind ("js" or "css"), one after the other."""
    return "\n".join((HERE / f"{name}.{ext}").read_text(encoding="utf-8") for name in (BASE, stem))


def register(name: str, stem: str) -> Callable[..., Any]:
    """st.components.v2.component `encoder_explorer.<name>` from ui/<stem>.js and .css, joined with the base."""
    return st.components.v2.component(f"encoder_explorer.{name}", js=joined(stem, "js"), css=joined(stem, "css"))
