"""The exception hierarchy every Kuration error belongs to.

Each class also derives from the builtin a caller would naturally catch (``ValueError`` for
bad input), so code written against the Cuvis.AI reference, which raises plain
``ValueError`` / ``RuntimeError``, keeps working. Messages name the file, row, field or
selector, show what was found against what was expected, and say how to fix it.
"""

from __future__ import annotations


class KurationError(Exception):
    """Base class of every error Kuration raises on purpose."""


class UniverseError(KurationError, ValueError):
    """A universe (``universe.csv``, a folder, a list of refs) is malformed."""


class SelectorError(KurationError, ValueError):
    """A selector is malformed, or cannot be resolved against the universe."""


class SplitConfigError(KurationError, ValueError):
    """A ``splits.json`` is not a valid ``DataSplitConfig``."""


class UniverseDriftError(KurationError, ValueError):
    """A split that still holds position-dependent selectors no longer matches its universe."""


class SplitConstraintError(KurationError, RuntimeError):
    """An ``error``-severity split constraint is violated or cannot be verified."""


class SplitLeakageError(SplitConstraintError):
    """Train, val and test share samples or groups."""


class SplitGenerationError(KurationError, ValueError):
    """A split cannot be generated from the given universe and options."""


class CommitError(KurationError, RuntimeError):
    """A dataset's commit record is missing, torn, tampered with or not committed."""
