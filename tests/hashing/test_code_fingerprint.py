"""One code fingerprint, the same in every process: the scoring cache key and the dataset
provenance both depend on it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kuration.canonical.hashing import canonical_json, canonical_state, code_fingerprint, code_object_digest
from tests.hashing import _user_code as user

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import json
    from kuration.canonical.hashing import code_fingerprint
    from kuration.scoring.features import register_feature
    from kuration.scoring import run_fingerprint
    from kuration.scoring.segments import Segmenter
    from kuration.scoring.strategy import Strategy
    from types import SimpleNamespace
    from tests.hashing import _user_code as user
    from tests.pipeline.recordings import SCHEMA

    register_feature("busiest_entity")(user.busiest_entity)
    register_feature("weather")(user.is_weather_tag)
    register_feature("typed")(user.SOURCE_LESS["typed_at_a_prompt"])
    register_feature("above_3")(user.threshold_feature(3.0))
    fingerprints = {name: code_fingerprint(fn) for name, fn in [
        ("busiest_entity", user.busiest_entity), ("weather", user.is_weather_tag),
        ("typed", user.SOURCE_LESS["typed_at_a_prompt"]), ("above_3", user.threshold_feature(3.0)),
        ("nan_default", user.with_nan_default), ("group_of", {"rec_2": "site_b", "rec_1": "site_a"}),
    ]}
    strategy = Strategy.from_dict({"name": "s", "method": "inclusion", "priority": {
        "fn.busiest_entity": 1.0, "fn.weather": 1.0, "fn.typed": 1.0, "fn.above_3": 1.0}})
    print(json.dumps({"fingerprints": fingerprints,
                      "scoring_run": run_fingerprint(SimpleNamespace(schema=SCHEMA), Segmenter(window=4, stride=2),
                                                     strategy)},
                      sort_keys=True))
""")


def _run_in_subprocess(hash_seed: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_fingerprints_and_the_scoring_run_are_equal_across_processes_and_hash_seeds():
    # different hash seeds reorder frozensets of strings; different processes move every address
    first, second = _run_in_subprocess("1"), _run_in_subprocess("2")
    assert first == second
    assert len(set(first["fingerprints"][k]["code_sha256"] or k for k in first["fingerprints"])) == 6


def test_nested_code_objects_are_digested_not_reprd():
    code = user.busiest_entity.__code__
    assert any(" at 0x" in repr(c) for c in code.co_consts)  # what made the old digest per-process
    assert len(code_object_digest(code)) == 64
    edited = compile(textwrap.dedent("""
        def busiest_entity(track):
            counts = sorted((len(v) for v in track.values()), key=lambda n: n)
            return max([c for c in counts if c > 0] or [0])
    """), "<edited>", "exec")
    edited_fn = next(c for c in edited.co_consts if hasattr(c, "co_name") and c.co_name == "busiest_entity")
    assert code_object_digest(edited_fn) != code_object_digest(code)  # the lambda's body changed, nothing else


def test_source_less_code_is_fingerprinted_by_its_bytecode():
    fp = code_fingerprint(user.SOURCE_LESS["typed_at_a_prompt"])
    assert fp["code_sha256"] == code_object_digest(user.SOURCE_LESS["typed_at_a_prompt"].__code__)


def test_closures_defaults_and_non_finite_floats_are_state():
    assert code_fingerprint(user.threshold_feature(3.0)) != code_fingerprint(user.threshold_feature(4.0))
    fp = code_fingerprint(user.with_nan_default)
    assert fp["state"]["defaults"] == [{"float": "nan"}, 2.5]
    canonical_json(fp)  # encodable without NaN


def test_a_mapping_is_fingerprinted_by_its_content():
    one = code_fingerprint({"rec_1": "site_a", "rec_2": "site_b"})
    assert one == code_fingerprint({"rec_2": "site_b", "rec_1": "site_a"})  # order is not content
    assert one != code_fingerprint({"rec_1": "site_a", "rec_2": "site_a"})
    assert one["name"] == "builtins.dict" and one["state"]["items"] == 2 and len(one["state"]["sha256"]) == 64
    assert code_fingerprint(["a", "b"]) != code_fingerprint(["b", "a"])  # a list's order is content


@pytest.mark.parametrize(("value", "expected"), [
    ({"b": 1, "a": [1.5, None]}, {"a": [1.5, None], "b": 1}),
    ({1: "x", "k": "y"}, {"mapping": [["k", "y"], [1, "x"]]}),  # sorted by canonical JSON
    (frozenset({"z", "a"}), {"set": ["a", "z"]}),
    (math.inf, {"float": "inf"}),
    (np.int64(7), 7),
    (b"abc", {"bytes_sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}),
])
def test_canonical_state(value, expected):
    assert canonical_state(value) == expected


def test_arrays_are_state_by_content():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert canonical_state(a) == canonical_state(a.copy(order="F"))
    assert canonical_state(a) != canonical_state(a.astype(np.float64))
    assert canonical_state(a)["shape"] == [2, 3]


def test_cyclic_state_does_not_recurse_forever():
    loop: list = []
    loop.append(loop)
    assert canonical_json(canonical_state(loop))
