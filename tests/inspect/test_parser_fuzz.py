"""Hostile input to the readers this package added: a quality policy (file text or a
value), a legacy manifest dict and a container registry. The contract: accepted, or a
documented ``KurationError`` naming what is wrong; no raw ``TypeError`` / ``KeyError`` /
``RecursionError`` escapes, and nothing hangs (bounded examples, deadlines)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import KurationError
from kuration.inspect.quality import POLICY_KEYS, QualityPolicy, parse_policy
from kuration.read import shard_entries

FUZZ = settings(max_examples=150, deadline=timedelta(seconds=5),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
keys = st.one_of(st.sampled_from(POLICY_KEYS), st.text(max_size=12))


@FUZZ
@given(st.dictionaries(keys, values, max_size=6) | values)
def test_a_policy_value_is_accepted_or_refused_naming_the_policy(data):
    try:
        policy = QualityPolicy.from_dict(data, where="fuzz")
    except KurationError as exc:
        assert str(exc).startswith("fuzz")
    else:
        assert isinstance(data, dict) and set(data) <= set(POLICY_KEYS) and policy.to_dict()


@FUZZ
@given(st.one_of(
    st.text(max_size=200),
    st.sampled_from(["[" * 5000, '{"a":' * 3000, '{"min_shards": 1e999}', '{"min_shards": ' + "9" * 5000 + "}",
                     '{"min_sources": 1, "min_sources": 1}', "\ufeff{}", '{"verify": tru'])))
def test_policy_text_is_accepted_or_refused_naming_where_it_came_from(text):
    try:
        parse_policy(text, where="quality.json")
    except KurationError as exc:
        assert str(exc).startswith("quality.json")


@FUZZ
@given(st.dictionaries(st.sampled_from(["entries", "output", "format"]) | st.text(max_size=6),
                       st.lists(st.dictionaries(st.sampled_from(["path", "split", "bytes", "sha256", "n_steps",
                                                                 "rows", "container", "entity_id"]), values,
                                                max_size=8), max_size=3) | values, max_size=4))
def test_a_legacy_manifest_dict_is_accepted_or_refused(tmp_path, manifest):
    try:
        shard_entries(manifest, root=tmp_path)
    except KurationError:
        pass


@pytest.mark.parametrize("registry", [["npz"], {"npz": 3}, {"npz": object}, {1: "npz"}, {"x": {"name": "x"}}, "npz"])
def test_a_registry_that_is_not_containers_is_refused(tmp_path, registry):
    manifest = {"entries": [], "output": {}}
    with pytest.raises(KurationError, match=r"registry"):
        shard_entries(manifest, root=tmp_path, registry=registry)
