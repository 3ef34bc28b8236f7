"""Numbers computed from the model: cost, position checks, rewired variants, training stability, token measures."""

# The whole-model measures register themselves in measures.MEASURES when imported; importing them here makes
# `import encoder.analysis.measures` (or any module of this package) enough to see them.
from . import alti, decompx, value_zeroing  # noqa: F401
