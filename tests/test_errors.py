"""The exception tree drawn in ``kuration.errors`` is the real one, and ``check_keys`` words
every unknown-key refusal the same way."""

from __future__ import annotations

import importlib
import pkgutil
import re
import textwrap
from dataclasses import dataclass

import pytest

import kuration
from kuration import errors
from kuration.errors import InputError, KurationError, check_keys, cut, shown

_LINE = re.compile(r"^(?P<prefix>[ │├└─]*)(?P<name>[A-Z]\w+)(?: "
                   r"\((?P<builtin>\w+)\))?(?:\s+(?P<module>kuration[\w.]*))?")
_BUILTINS = {"ValueError": ValueError, "RuntimeError": RuntimeError, "ImportError": ImportError}


@dataclass(frozen=True)
class Drawn:
    """One line of the drawing: the class it names, where it is drawn and what it says."""

    name: str
    module: str
    parent: str | None
    builtin: str | None


def drawing() -> str:
    return textwrap.dedent(errors.__doc__.split("::", 1)[1].split("\n\n")[1])


def parse_drawing(text: str) -> list[Drawn]:
    rows: list[Drawn] = []
    stack: list[str] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        assert match, f"not a tree line: {line!r}"
        depth = len(match["prefix"]) // 4
        del stack[depth:]
        rows.append(Drawn(match["name"], match["module"] or "kuration.errors", stack[-1] if stack else None,
                          match["builtin"]))
        stack.append(match["name"])
    return rows


def kuration_error_classes() -> dict[str, type]:
    """Every ``KurationError`` subclass the package defines, by name (importing every module)."""
    for info in pkgutil.walk_packages(kuration.__path__, prefix="kuration."):
        importlib.import_module(info.name)

    def below(cls: type) -> set[type]:
        return {cls, *(sub for child in cls.__subclasses__() for sub in below(child))}

    found = [c for c in below(KurationError) if c.__module__.startswith("kuration.")]
    assert len({c.__name__ for c in found}) == len(found), "two error classes share a name"
    return {c.__name__: c for c in found}


def tree_problems(text: str, classes: dict[str, type]) -> list[str]:
    """Where the drawing ``text`` and the ``classes`` disagree: a class drawn twice, drawn but
    not defined, not drawn, drawn under another parent, with another module, or with another
    builtin than the one it derives from directly."""
    problems = []
    rows = parse_drawing(text)
    drawn = [row.name for row in rows]
    problems += [f"{name} is drawn {drawn.count(name)} times" for name in sorted(set(drawn)) if drawn.count(name) > 1]
    problems += [f"{name} is drawn but not defined" for name in drawn if name not in classes]
    problems += [f"{classes[name].__module__}.{name} is not drawn" for name in sorted(set(classes) - set(drawn))]
    for row in rows:
        cls = classes.get(row.name)
        if cls is None:
            continue
        parents = [b.__name__ for b in cls.__bases__ if issubclass(b, KurationError)]
        builtins = [b.__name__ for b in cls.__bases__ if b.__name__ in _BUILTINS]
        if row.parent is None and cls is not KurationError or row.parent is not None and parents != [row.parent]:
            problems.append(f"{row.name} is drawn under {row.parent}, derives from {parents}")
        if row.module != cls.__module__:
            problems.append(f"{row.name} is drawn in {row.module}, defined in {cls.__module__}")
        if builtins != ([row.builtin] if row.builtin else []):
            problems.append(f"{row.name} is drawn with builtin {row.builtin}, derives directly from {builtins}")
    return problems


def test_the_docstring_tree_is_the_class_tree():
    assert parse_drawing(drawing())[0] == Drawn("KurationError", "kuration.errors", None, None)
    assert tree_problems(drawing(), kuration_error_classes()) == []
    boundaries = [row for row in parse_drawing(drawing()) if row.parent == "KurationError"]
    assert len(boundaries) <= 10, "keep the boundaries few; subclass one instead"


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda t: t.replace("│   ├── SchemaError                            kuration.sources.schema\n", ""),
     "kuration.sources.schema.SchemaError is not drawn"),
    (lambda t: t.replace("kuration.landing.recordings", "kuration.landing"),
     "RecordingNameError is drawn in kuration.landing, defined in kuration.landing.recordings"),
    (lambda t: t.replace("│   │   └── TickDataError", "│   ├── TickDataError   "),
     "TickDataError is drawn under RecordingError, derives from ['SourceError']"),
    (lambda t: t.replace("FeatureError (ValueError)", "FeatureError (RuntimeError)"),
     "FeatureError is drawn with builtin RuntimeError, derives directly from ['ValueError']"),
    (lambda t: t.replace("LeaseError (RuntimeError)", "LeaseError             "),
     "LeaseError is drawn with builtin None, derives directly from ['RuntimeError']"),
    (lambda t: t + "\n└── LeaseError                               again", "LeaseError is drawn 2 times"),
])
def test_the_tree_check_finds_a_drawing_that_is_out_of_date(edit, problem):
    # the check above is not vacuous: each way a drawing goes stale is reported
    changed = edit(drawing())
    assert changed != drawing()
    assert problem in tree_problems(changed, kuration_error_classes())


def test_every_leaf_keeps_a_builtin_a_caller_would_catch():
    # Code written against Cuvis.AI catches ValueError / RuntimeError; none of ours may escape both
    for cls in kuration_error_classes().values():
        if not cls.__subclasses__():
            assert issubclass(cls, (ValueError, RuntimeError, ImportError)), cls.__name__


def test_the_folded_aliases_are_gone():
    # ScoringOptionsError and DestinationError were InputError under other names; the project has
    # had no release, so nothing needs them
    import kuration.output.destinations
    import kuration.scoring
    import kuration.scoring.score_sources

    for module, name in [(kuration.scoring, "ScoringOptionsError"), (kuration.scoring.score_sources,
                                                                    "ScoringOptionsError"),
                         (kuration.output.destinations, "DestinationError")]:
        assert not hasattr(module, name), f"{module.__name__}.{name}"


def test_check_keys_names_the_place_the_unknown_keys_and_the_valid_ones():
    check_keys({"a": 1}, ("a", "b"), where="thing")  # nothing unknown: no error
    with pytest.raises(InputError, match=r"^thing\.part: unknown key\(s\) \['c', 'd'\]; valid keys: \['b', 'a'\]$"):
        check_keys({"d": 1, "a": 2, "c": 3}, ("b", "a"), where="thing.part")


def test_check_keys_raises_the_callers_class_and_survives_hostile_keys():
    class Own(KurationError, ValueError):
        pass

    with pytest.raises(Own, match=r"^x: unknown key\(s\) \['z', 1, None\]; valid keys: \[\]$"):
        check_keys({"z": 0, None: 0, 1: 0}, (), where="x", error=Own)
    with pytest.raises(Own, match=r"^x: unknown key\(s\) <list too large to show>; valid keys: \[.a.\]$"):
        check_keys({10**5000: 0}, ("a",), where="x", error=Own)
    long = {f"k{i:03d}": i for i in range(100)}
    with pytest.raises(Own) as caught:
        check_keys(long, ("a",), where="x", error=Own)
    assert len(str(caught.value)) < 260 and "..." in str(caught.value)


def test_shown_cuts_long_values_and_names_what_it_cannot_print():
    assert shown("abc") == "'abc'"
    assert shown("x" * 100, 20) == "'" + "x" * 16 + "..."
    assert shown(10**5000) == "<int too large to show>"


def test_shown_and_cut_say_the_length_of_what_they_cut_when_asked():
    assert shown("x" * 100, 20, length=True) == "'" + "x" * 16 + "... (100 characters)"
    numbers = repr(list(range(50)))
    assert shown(list(range(50)), 20, length=True) == f"{numbers[:17]}... ({len(numbers)} characters)"
    assert shown("short", length=True) == "'short'"
    assert shown(10**5000, length=True) == "<int too large to show>"
    assert cut("abcdef", 5) == "ab..."
    assert cut("abcdef", 5, total=6) == "ab... (6 characters)"
    assert cut("abcde", 5, total=5) == "abcde"
