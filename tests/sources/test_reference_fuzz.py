"""Hostile media references: the reference grammars raise only MediaError, naming the
reference's position, and whatever they accept is a well-formed (where, row) pair."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.numbers import MAX_INDEX
from kuration.sources.media import MediaError, MediaSpec, _parse_npy_ref, parse_row_ref

SPEC = MediaSpec("cam", "uint8", (2, 2), "npy_index")
REFERENCE_TEXT = st.text(alphabet="ab./#0123456789-+ _\u0661\U0001d7d9", max_size=40) | st.text(max_size=40)
ANYTHING = REFERENCE_TEXT | st.none() | st.integers() | st.floats() | st.binary(max_size=8) | st.lists(st.integers())


@settings(max_examples=400, deadline=None)
@given(ANYTHING, st.integers(0, 10**6))
def test_row_references_raise_only_media_errors(ref, index):
    try:
        where, row = parse_row_ref(ref, SPEC, "src", index, "'<array>#<row>'")
    except MediaError as exc:
        assert exc.reference == index and str(exc).startswith(f"src: media 'cam', reference {index}: ")
    else:
        assert isinstance(ref, str) and ref == f"{where}#{row}" and where and 0 <= row <= MAX_INDEX


@settings(max_examples=400, deadline=None)
@given(ANYTHING, st.integers(0, 10**6))
def test_npy_references_raise_only_media_errors(ref, index):
    try:
        path, key, row = _parse_npy_ref(ref, SPEC, "src", index)
    except MediaError as exc:
        assert exc.reference == index
    else:
        assert isinstance(ref, str) and path and ref.startswith(path)
        assert row is None or 0 <= row <= MAX_INDEX
        assert key is None or key
