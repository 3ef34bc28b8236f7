"""The operator's folders (models: ui/checkpoints.py, lessons: ui/lessons/library.py): what they have in common.

Only the operator chooses a folder, through an environment variable on the server; a browser names an entry of it,
and a name is used only if it passes the folder's name rule, so nothing typed in a browser becomes a path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def operator_folder(env: str) -> Path | None:
    """The directory the environment variable `env` names (~ expanded, links resolved); None if unset or no directory."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return None
    root = Path(raw).expanduser().resolve()
    return root if root.is_dir() else None


def name_rule(longest: int) -> re.Pattern[str]:
    """Names an entry may have: a letter or digit first, then letters, digits, '.', '_' and '-'; `longest` at most."""
    return re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{longest - 1}}}$")
