"""Kuration core library: plain Python over numpy / pyarrow / fsspec. Never imports dagster.

Subpackages: :mod:`kuration.splits` (universe, selectors, leakage, drift, baking).
"""

from kuration.errors import (
    KurationError,
    SelectorError,
    SplitConfigError,
    SplitConstraintError,
    SplitGenerationError,
    SplitLeakageError,
    UniverseDriftError,
    UniverseError,
)

__version__ = "0.1.0"

__all__ = [
    "KurationError",
    "SelectorError",
    "SplitConfigError",
    "SplitConstraintError",
    "SplitGenerationError",
    "SplitLeakageError",
    "UniverseDriftError",
    "UniverseError",
    "__version__",
]
