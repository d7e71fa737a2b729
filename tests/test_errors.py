"""The exception tree drawn in ``kuration.errors`` is the real one, and ``check_keys`` words
every unknown-key refusal the same way."""

from __future__ import annotations

import importlib
import pkgutil
import re
import textwrap

import pytest

import kuration
from kuration import errors
from kuration.errors import InputError, KurationError, check_keys, cut, shown

_LINE = re.compile(r"^(?P<prefix>[ │├└─]*)(?P<name>[A-Z]\w+)(?: "
                   r"\((?P<builtin>\w+)\))?(?:\s+(?P<module>kuration[\w.]*))?")
_BUILTINS = {"ValueError": ValueError, "RuntimeError": RuntimeError, "ImportError": ImportError}


def _drawn_tree() -> list[tuple[type, type | None, type | None]]:
    """``(class, parent, builtin)`` for every line of the docstring's tree."""
    drawing = textwrap.dedent(errors.__doc__.split("::", 1)[1].split("\n\n")[1])
    rows, stack = [], []
    for line in drawing.splitlines():
        match = _LINE.match(line)
        assert match, f"not a tree line: {line!r}"
        depth = len(match["prefix"]) // 4
        module = importlib.import_module(match["module"] or "kuration.errors")
        cls = getattr(module, match["name"])
        del stack[depth:]
        rows.append((cls, stack[-1] if stack else None, _BUILTINS.get(match["builtin"])))
        stack.append(cls)
    return rows


def test_the_docstring_tree_is_the_class_tree():
    rows = _drawn_tree()
    assert rows[0] == (KurationError, None, None)
    for cls, parent, builtin in rows[1:]:
        assert parent in cls.__bases__, f"{cls.__name__} is drawn under {parent.__name__}, derives from {cls.__bases__}"
        if builtin is not None:
            assert issubclass(cls, builtin), f"{cls.__name__} is drawn as a {builtin.__name__}"
    boundaries = [cls for cls, parent, _ in rows if parent is KurationError]
    assert len(boundaries) <= 10, "keep the boundaries few; subclass one instead"


def test_every_leaf_keeps_a_builtin_a_caller_would_catch():
    # Code written against Cuvis.AI catches ValueError / RuntimeError; none of ours may escape both
    for cls, parent, _ in _drawn_tree():
        if parent is not None and not cls.__subclasses__():
            assert issubclass(cls, (ValueError, RuntimeError, ImportError)), cls.__name__


def test_every_kuration_error_class_is_drawn():
    for info in pkgutil.walk_packages(kuration.__path__, prefix="kuration."):
        importlib.import_module(info.name)
    drawn = {cls for cls, _, _ in _drawn_tree()}

    def all_subclasses(cls: type) -> set[type]:
        return {cls, *(sub for child in cls.__subclasses__() for sub in all_subclasses(child))}

    missing = sorted(f"{c.__module__}.{c.__name__}" for c in all_subclasses(KurationError) - drawn
                     if c.__module__.startswith("kuration."))
    assert missing == [], "draw these in kuration/errors.py's docstring"


def test_folded_names_stay_importable_as_their_boundary():
    from kuration.output.destinations import DestinationError
    from kuration.scoring import ScoringOptionsError

    assert ScoringOptionsError is InputError and DestinationError is InputError


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
