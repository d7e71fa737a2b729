"""The exception hierarchy every Kuration error belongs to, and how messages show what they got.

A caller catches a boundary class to handle "this stage failed" whatever the reason (the
message says which), and a leaf only where it acts differently on it: the settings loader
names the file of a ``SchemaError``, a writer told ``DifferentRunError`` may replace the
other run, an adapter rewraps its store's ``SourceError`` as a ``MediaError``. A class that
no caller told apart from its boundary is that boundary (a byte size, a scoring option or a
destination that cannot hold a dataset raises ``InputError`` itself).

Every class also derives from the builtin a caller would naturally catch: ``ValueError``
for input that is wrong, ``RuntimeError`` for a state that refuses the operation,
``ImportError`` for a missing optional package. Code written against the Cuvis.AI
reference, which raises plain ``ValueError`` / ``RuntimeError``, keeps working. A boundary
with leaves of both kinds carries no builtin itself; its leaves do. The tree, each class
with the builtin it derives from directly and the module that defines it (a boundary: this
one)::

    KurationError                                  every error Kuration raises on purpose
    ├── InputError (ValueError)                    a declaration or an option: a settings file, a dict, an argument
    │   ├── SchemaError                            kuration.sources.schema
    │   ├── SegmenterError                         kuration.scoring.segments
    │   ├── StrategyError                          kuration.scoring.strategy
    │   ├── PluginError                            kuration.landing.plugins
    │   ├── OutputSpecError                        kuration.output.spec
    │   ├── CurationConfigError                    kuration.landing.curation_config
    │   ├── UsageError                             kuration.cli: command-line options that do not go together
    │   └── LandingZoneError                       kuration.landing.zone
    │       └── LandingZoneChangedError            kuration.landing.zone
    ├── RecordingError (ValueError)                a recording, its media or an entity id cannot be read as declared
    │   ├── MediaError                             kuration.sources.media
    │   ├── EntityIdError                          kuration.sources.entities
    │   ├── SourceError                            kuration.sources.ticks
    │   │   └── TickDataError                      kuration.sources.ticks
    │   └── RecordingNameError                     kuration.landing.recordings
    ├── ScoringError                               the feature pass cannot give the pool asked for
    │   ├── FeatureError (ValueError)              kuration.scoring.features
    │   ├── EmptySegmentPoolError (ValueError)     kuration.scoring.score_sources
    │   ├── SourceScoringError (RuntimeError)      kuration.scoring.score_sources
    │   └── MemoryBudgetError (RuntimeError)       kuration.scoring.pools
    ├── SplitError                                 a universe, its selectors, a splits.json, its constraints
    │   ├── UniverseError (ValueError)             kuration.errors
    │   ├── SelectorError (ValueError)             kuration.errors
    │   ├── SplitConfigError (ValueError)          kuration.errors
    │   ├── UniverseDriftError (ValueError)        kuration.errors
    │   ├── SplitConstraintError (RuntimeError)    kuration.errors
    │   │   └── SplitLeakageError                  kuration.errors
    │   └── SplitGenerationError (ValueError)      kuration.errors
    ├── BudgetError (ValueError)                   budget options, split assignments, a plan or a stored plan
    ├── OutputError                                a training dataset cannot be written as asked
    │   ├── EncoderError (ValueError)              kuration.output.encoders
    │   ├── ShardFormatError (ValueError)          kuration.output.containers.protocol
    │   ├── MissingDependencyError (ImportError)   kuration.output.containers._common
    │   ├── MissingValueError (ValueError)         kuration.output.shard_assembly
    │   └── DatasetWriteError (RuntimeError)       kuration.output.write_errors
    │       ├── DifferentRunError                  kuration.output.write_errors
    │       ├── EmptyPlanError                     kuration.output.write_errors
    │       └── WriteWorkerError                   kuration.output.write_errors
    ├── CommitError (RuntimeError)                 a dataset on storage is not committed and consistent
    │   └── DatasetIntegrityError                  kuration.read.committed
    ├── LeaseError (RuntimeError)                  another writer holds the destination
    ├── RolloutError                               a rollout replay store cannot be built, read or trusted
    │   ├── RolloutInputError (ValueError)         kuration.errors: records, config or a recipe's output
    │   └── RolloutStoreError (RuntimeError)       kuration.errors: a store on disk breaks its contract
    └── IsolatedDecoderError (RuntimeError)        kuration.read.isolated: the machine failed, not the shard

Boundaries live here; a leaf lives in the module that raises it (the split errors live
here because the whole ``kuration.splits`` package shares them). ``tests/test_errors.py``
checks this tree against the classes: every ``KurationError`` subclass in the package is
drawn once, under its parent, with the module that defines it and its direct builtin.

Messages name the file, row, field or selector, show what was found against what was
expected, and say how to fix it. :func:`shown` quotes a value without failing on it (:func:`cut` shortens text
already printed), and :func:`check_keys` is the one unknown-key check every
``from_dict`` uses. This module
imports nothing from Kuration: everything imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class KurationError(Exception):
    """Base class of every error Kuration raises on purpose."""


class InputError(KurationError, ValueError):
    """A declaration or an option is invalid: a settings file, a dict built in Python, or
    an argument (a byte size, a scoring option, a destination that cannot hold a dataset)."""


class RecordingError(KurationError, ValueError):
    """A recording (a source), its media or an entity id in it cannot be read as declared."""


class ScoringError(KurationError):
    """The feature pass cannot give the segment pool asked for."""


class SplitError(KurationError):
    """A universe, a selector, a ``splits.json`` or a split constraint is wrong or violated."""


class UniverseError(SplitError, ValueError):
    """A universe (``universe.csv``, a folder, a list of refs) is malformed."""


class SelectorError(SplitError, ValueError):
    """A selector is malformed, or cannot be resolved against the universe."""


class SplitConfigError(SplitError, ValueError):
    """A ``splits.json`` is not a valid ``DataSplitConfig``."""


class UniverseDriftError(SplitError, ValueError):
    """A split that still holds position-dependent selectors no longer matches its universe."""


class SplitConstraintError(SplitError, RuntimeError):
    """An ``error``-severity split constraint is violated or cannot be verified."""


class SplitLeakageError(SplitConstraintError):
    """Train, val and test share samples or groups."""


class SplitGenerationError(SplitError, ValueError):
    """A split cannot be generated from the given universe and options."""


class BudgetError(KurationError, ValueError):
    """A budget request is invalid, cannot be planned over the given segments, or a stored
    plan breaks its contract."""


class OutputError(KurationError):
    """A training dataset cannot be written as asked."""


class CommitError(KurationError, RuntimeError):
    """A dataset's commit record is missing, torn, tampered with or not committed, or its
    manifest or config does not match it."""


class LeaseError(KurationError, RuntimeError):
    """Another writer holds the destination."""


class RolloutError(KurationError):
    """A rollout replay store cannot be built, read or trusted."""


class RolloutInputError(RolloutError, ValueError):
    """Rollout records, a store config or a recipe's output break the store's contract
    before anything is written."""


class RolloutStoreError(RolloutError, RuntimeError):
    """A rollout store on storage is missing, incomplete or breaks its schema, so a
    reader refuses it (it never repairs one)."""


def shown(value: Any, limit: int = 80, *, length: bool = False) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message. ``repr`` of an int
    past 4300 digits raises ``ValueError`` (and anything holding one does too): such a value
    is named by its type and size instead. ``length=True`` says how long a cut value was (a
    string's own length, not its repr's), for text read from a file, where a hostile cell
    can be megabytes long."""
    try:
        text = repr(value)
    except ValueError:
        return f"<{type(value).__name__} too large to show>"
    if not length:
        return cut(text, limit)
    return cut(text, limit, total=len(value) if isinstance(value, str) else len(text))


def cut(text: str, limit: int = 80, *, total: int | None = None) -> str:
    """``text`` (already printed: a repr, a JSON spelling) cut to ``limit`` characters, with
    ``...`` where it was cut and, when ``total`` is given, ``(<total> characters)`` after."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 3] + "..."
    return kept if total is None else f"{kept} ({total} characters)"


def check_keys(data: Mapping[Any, Any], allowed: Iterable[str], *, where: str,
               error: type[Exception] = InputError) -> None:
    """Raise ``error`` when ``data`` has a key outside ``allowed``: ``"<where>: unknown
    key(s) [...]; valid keys: [...]"``, the unknown keys sorted (keys of a dict built in
    Python need not be strings) and the valid ones in their declared order. A typo in a
    declaration must fail, not be ignored."""
    valid = list(allowed)
    unknown = sorted(set(data) - set(valid), key=shown)
    if unknown:
        raise error(f"{where}: unknown key(s) {shown(unknown, 200)}; valid keys: {valid}")


__all__ = [
    "BudgetError", "CommitError", "InputError", "KurationError", "LeaseError", "OutputError", "RecordingError",
    "RolloutError", "RolloutInputError", "RolloutStoreError",
    "ScoringError", "SelectorError", "SplitConfigError", "SplitConstraintError", "SplitError", "SplitGenerationError",
    "SplitLeakageError", "UniverseDriftError", "UniverseError", "check_keys", "cut", "shown",
]
