"""Pinned plan digests: a plan over seeded random pools must stay bit for bit what it was,
on every machine.

The digests were first recorded with the implementation before the scaling work on the
fill (commit 5909ef6), so a faster ordering, a different way of building the spans or of
gathering columns cannot change a single item, rank, reason or accounting figure without
this failing. They were re-pinned once, on purpose, when the plan's floats became
canonical (``-0.0`` as ``0.0``, one NaN; :mod:`kuration.canonical.floats`): before that, a span's
``max`` over ``0.0`` and ``-0.0`` depended on the CPU's SIMD kernel, so the old digests held
only on CPUs with AVX-512. The values are the same, only the sign of those zeros changed.
They were re-pinned a second time when items gained ``present_seconds`` and the budget
block its present-data keys and the ``absent`` exclusion: every decision stayed the same
(these pools have no absent windows). ``tests/test_cpu_dispatch.py`` reruns these cases
under narrowed numpy dispatch.

The pools and cases are in ``tests/budget/pinned_pools.py``.
"""

from __future__ import annotations

import pytest

from tests.budget.pinned_pools import CASES, plan_digest, run_case

#: The digest of each case's plan.
EXPECTED = {
    "blocks": "f303fecd0e00fc13bdd013fba61de2a6068fec133b6b510eb80e7d36b89b5c72",
    "count": "9cbb941a91af62ca77cdb16e51af6210f7f652b3ecc3a721349ae87d4dc1bf7e",
    "hours_span_steps_group_cap": "dbe5fd4b5648354886e1d9fb0eb376d1ad2e003d4c134b7fbe64b1c836f87750",
    "hours_straddling_windows_two_rates_filter": "d993879491ff42494e7b3b0c2a32af53493d15b4c121beb9f2ba8780da028145",
    "resolved_splits": "2113b6b8564afe423f115d51e5c1fd38bfc3a120c8982d8a57a42db2df689ac6",
    "whole_tracks_no_cap": "c7fc243de9a9e6bb14530e3460803b8e2c26240bacbe699c10e5aaee5540d56b",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_digest_is_pinned(name, monkeypatch):
    plan = run_case(name, monkeypatch)
    assert plan_digest(plan) == EXPECTED[name]
