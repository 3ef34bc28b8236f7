"""A component registered once, when its module is imported, as the app's are (tests/js/test_components.py)."""

from __future__ import annotations

from ui.components import register

mount = register("probe", "copy_link")
