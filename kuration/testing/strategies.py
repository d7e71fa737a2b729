"""Hypothesis strategies the kits share with Kuration's own fuzz tests: bytes damaged the
ways storage, transfer and tampering damage them.

What it does not do: produce valid data. Each kit builds its own valid data, then damages it
with these.
"""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with bits flipped or bytes overwritten (near the front, where headers and
    metadata are, as often as anywhere), cut short, or with bytes inserted."""
    out = bytearray(data)
    kind = draw(st.sampled_from(["flip", "flip", "overwrite", "cut", "insert"]))
    if kind == "cut":
        return bytes(out[: draw(st.integers(0, len(out) - 1))])
    if kind == "insert":
        at = draw(st.integers(0, len(out)))
        return bytes(out[:at] + draw(st.binary(min_size=1, max_size=16)) + out[at:])
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, min(len(out), 4096) - 1) | st.integers(0, len(out) - 1))
        if kind == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        else:
            out[at] = draw(st.integers(0, 255))
    return bytes(out)


__all__ = ["damaged"]
