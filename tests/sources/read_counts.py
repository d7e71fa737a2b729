"""Counting the files a test's code reads through :func:`kuration.storage.read_bytes`."""

from __future__ import annotations

from kuration import storage


def count_reads(monkeypatch, suffix: str = "") -> dict[str, int]:
    """``{url: times read}`` of the files ending in ``suffix`` that ``storage.read_bytes`` reads from now on."""
    reads: dict[str, int] = {}
    real = storage.read_bytes

    def counting(url):
        if str(url).endswith(suffix):
            reads[str(url)] = reads.get(str(url), 0) + 1
        return real(url)

    monkeypatch.setattr(storage, "read_bytes", counting)
    return reads
