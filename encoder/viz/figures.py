"""Old home of the plotly builders, kept only for ui/heatmap.py and ui/headview.py until they import the new modules.

The builders moved by subject: style.py (look, colour scales), export.py (file names), axes.py (token axes),
attention.py, activations.py and similarity.py. Nothing else may import this module (tests/test_structure.py).
"""

from __future__ import annotations

from .attention import colour_scale
from .export import export_name
from .style import ATTENTION_SCALE
from .style import colorscale as _scale  # noqa: F401 (ui/heatmap.py reads figures._scale)

__all__ = ["ATTENTION_SCALE", "colour_scale", "export_name"]
