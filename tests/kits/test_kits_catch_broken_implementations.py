"""Every kit of :mod:`kuration.testing` catches a broken implementation, so none can pass
vacuously.

Each test writes a plugin's own test module, as a plugin author would, into a fresh folder
outside this tree: ``class TestGood(<Kit>)`` over a correct implementation and
``class TestBroken(<Kit>)`` over the same implementation with one realistic bug. It runs
pytest on that module in a new process and checks that every ``TestGood`` test passes (or
skips), and that the kit's tests that guard against the bug fail for ``TestBroken``. Where a
kit is long, ``-k`` keeps the tests around the bug: the whole kits run on the tree's own
implementations elsewhere.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
#: How a failure a kit's check reports begins: a failed assert, or a pytest.raises that was not met.
CHECK_FAILED = ("assert", "AssertionError", "Failed: DID NOT RAISE")


@dataclass(frozen=True)
class PluginRun:
    """What pytest said about each test of the plugin's module: ``"class::test"`` ->
    (``passed``, ``skipped``, ``failure`` or ``error``, the failure's message)."""

    outcomes: dict[str, tuple[str, str]]
    output: str

    def of(self, cls: str) -> dict[str, tuple[str, str]]:
        return {name.split("::", 1)[1]: outcome for name, outcome in self.outcomes.items()
                if name.startswith(f"{cls}::")}


def run_plugin_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str,
                     *args: str) -> PluginRun:
    """Write ``source`` as ``test_plugin.py`` in a fresh folder and run pytest on it there in
    a new process (this tree on ``PYTHONPATH``: its ``kuration``, and ``tests`` helpers)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_plugin=textwrap.dedent(source))
    report = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", f"--junitxml={report}", *args, timeout=300)
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        found = [(child.tag, child.get("message", "")) for child in case
                 if child.tag in ("failure", "error", "skipped")]
        outcomes[f"{case.get('classname', '').rpartition('.')[2]}::{case.get('name')}"] = (
            found[0] if found else ("passed", ""))
    return PluginRun(outcomes, "\n".join(result.outlines))


def assert_caught(run: PluginRun, *caught: str) -> None:
    """``TestGood`` passed (a test the kit skips for it aside); every ``TestBroken`` test whose
    name starts with one of ``caught`` failed a check of the kit's, not with an error of the
    plugin's code (and at least one of them ran)."""
    good, broken = run.of("TestGood"), run.of("TestBroken")
    assert good and {kind for kind, _ in good.values()} <= {"passed", "skipped"}, run.output
    assert any(kind == "passed" for kind, _ in good.values()), run.output
    guarding = {name: outcome for name, outcome in broken.items() if name.startswith(caught)}
    assert guarding, f"no TestBroken test named {caught} ran:\n{run.output}"
    for name, (kind, message) in guarding.items():
        assert kind == "failure" and message.startswith(CHECK_FAILED), (name, kind, message, run.output)


def test_the_kits_load_outside_this_tree_without_the_tests_package(tmp_path):
    """A plugin has no ``tests`` package: every kit imports from the library alone."""
    code = ("import importlib, sys, kuration.testing as kits\n"
            "for name in kits.__all__: getattr(kits, name)\n"
            "print(any(m == 'tests' or m.startswith('tests.') for m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "False"


def test_importing_kuration_does_not_import_the_kits():
    program = "import sys, kuration, kuration.sources, kuration.output; print('kuration.testing' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_adapter_kit_catches_a_weak_identity(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import os

        from kuration.sources import ParquetTickAdapter, SourceIdentity
        from tests.kits.implementations import ParquetEpisodes


        class PathAndSize(ParquetTickAdapter):
            def identity(self, source_id):  # the bug: a path and a size say nothing of the content
                super().identity(source_id)  # a source that is not there still raises
                size = os.path.getsize(os.path.join(self.root_url, source_id))
                return SourceIdentity("logical", f"{source_id}:{size}")


        class TestGood(ParquetEpisodes):
            pass


        class TestBroken(ParquetEpisodes):
            def make_adapter(self, root, schema):
                return PathAndSize(root, schema)
    """, "-k", "identity or schema")
    assert_caught(run, "test_identity_is_strong_and_stable", "test_identity_changes_with_that_source_only")
    assert "+  where False = SourceIdentity(kind='logical'" in run.output  # the kit's asserts are rewritten


def test_the_media_kit_catches_a_provider_that_sorts_its_references(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        from kuration.sources.media import NpyIndexProvider, register_media_provider
        from tests.kits.implementations import NpyFiles


        class SortedRows(NpyIndexProvider):
            def decode(self, refs, spec, *, root, source_id):  # the bug: reads rows in file order
                return super().decode(sorted(refs, key=lambda r: (r is None, r or "")), spec, root=root,
                                      source_id=source_id)


        register_media_provider("kit_sorted_rows", SortedRows)


        class TestGood(NpyFiles):
            pass


        class TestBroken(NpyFiles):
            provider_name = "kit_sorted_rows"
    """, "-k", "order or valid_references or absent")
    assert_caught(run, "test_the_order_of_the_references_is_the_order_of_the_rows[descending]",
                  "test_none_is_an_absent_slot_of_zeros_in_its_place")


def test_the_container_kit_catches_read_only_arrays(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import pytest

        from kuration.output.containers import NpzContainer, ShardArrays
        from kuration.testing import ShardContainerContract


        class ReadOnlyNpz(NpzContainer):
            name = "npz_read_only"

            def read(self, *args, **kwargs):  # the bug: arrays that view immutable bytes
                shard = super().read(*args, **kwargs)
                for array in shard.arrays.values():
                    array.flags.writeable = False
                return shard


        class TestGood(ShardContainerContract):
            @pytest.fixture
            def container(self):
                return NpzContainer()


        class TestBroken(ShardContainerContract):
            @pytest.fixture
            def container(self):
                return ReadOnlyNpz()
    """, "-k", "not round_trip_is_bit_exact and not damaged_bytes")
    assert_caught(run, "test_through_the_hashing_writer", "test_zero_rows", "test_uint8_frames_64_rows")


def test_the_destination_kit_catches_a_missing_file_read_as_empty(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import os
        import pathlib

        import pytest

        from kuration import storage
        from kuration.output.destinations import LocalDestination
        from kuration.testing import DestinationContract, Killed


        class EmptyWhenMissing(LocalDestination):
            def read(self, relative):  # the bug: a missing file reads as no bytes
                data = super().read(relative)
                return b"" if data is None else data


        class Local(DestinationContract):
            destination = LocalDestination

            @pytest.fixture(autouse=True)
            def _base(self, tmp_path):
                self.base = tmp_path

            def make_destination(self, place):
                return self.destination(self.base / place)

            def dying_at_publish(self, monkeypatch):
                def replace(src, dst, *args, **kwargs):
                    raise Killed(f"killed before moving {src} to {dst}")

                real_unlink = pathlib.Path.unlink

                def unlink(path, *args, **kwargs):
                    if not path.name.startswith(storage.TEMP_PREFIX):
                        real_unlink(path, *args, **kwargs)

                monkeypatch.setattr(os, "replace", replace)
                monkeypatch.setattr(pathlib.Path, "unlink", unlink)


        class TestGood(Local):
            pass


        class TestBroken(Local):
            destination = EmptyWhenMissing
    """, "-k", "missing or mid_write or remove or sealed")
    assert_caught(run, "test_a_missing_file_reads_as_none", "test_a_container_that_fails_mid_write_publishes_nothing",
                  "test_remove_takes_the_file_and_the_folders_it_empties")


def test_the_score_cache_kit_catches_a_key_without_the_run(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        from kuration.scoring.cache import MemoryScoreCache
        from kuration.testing import ScoreCacheContract


        class PerSource:
            def __init__(self):
                self.entries = {}

            def get(self, run_fingerprint, source_id, identity):  # the bug: the run is not in the key
                return self.entries.get((source_id, identity)) if identity.strong else None

            def put(self, run_fingerprint, source_id, identity, table):
                if identity.strong:
                    self.entries[(source_id, identity)] = table


        class TestGood(ScoreCacheContract):
            def make_cache(self):
                return MemoryScoreCache()


        class TestBroken(ScoreCacheContract):
            def make_cache(self):
                return PerSource()
    """)
    assert_caught(run, "test_an_entry_is_found_only_under_its_own_key[run]",
                  "test_an_entry_is_found_only_under_its_own_key[run-same-prefix]")


def test_the_shard_source_kit_catches_a_source_that_drops_untrusted(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import dataclasses

        from kuration.read import load_committed
        from tests.kits.implementations import CommittedDatasets


        class TestGood(CommittedDatasets):
            pass


        class TestBroken(CommittedDatasets):
            def open_source(self, root, *, untrusted, decode_timeout):  # the bug: trusts every dataset
                return dataclasses.replace(load_committed(root, decode_timeout=decode_timeout), untrusted=False)
    """, "-k", "untrusted or spec")
    assert_caught(run, "test_untrusted_and_the_decode_timeout_are_what_was_asked[True-None]",
                  "test_untrusted_and_the_decode_timeout_are_what_was_asked[True-7.5]")


def test_the_attribute_loader_kit_catches_rows_counted_within_the_scope(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import dataclasses

        import numpy as np

        from kuration.splits import PreloadedAttributes
        from kuration.testing import AttributeLoaderContract
        from kuration.testing.attributes import CATEGORY_NAMES


        class ScopeRows:
            def __init__(self, by_uid):
                self.inner = PreloadedAttributes(by_uid, name_to_id=CATEGORY_NAMES)

            def load(self, universe, required, *, sources=None):
                got = self.inner.load(universe, required, sources=sources)
                if sources is None:
                    return got
                # the bug: rows numbered within the scope, not in the universe
                position = {int(row): i for i, row in enumerate(universe.rows_of_sources(sorted(sources)))}
                renumber = lambda rows: np.asarray([position[int(r)] for r in rows], np.int64)
                return dataclasses.replace(got, tag_rows=renumber(got.tag_rows),
                                           category_rows=renumber(got.category_rows))


        class TestGood(AttributeLoaderContract):
            def store(self, root, samples):
                return PreloadedAttributes({s.uid: (s.tags, s.category_ids) for s in samples},
                                           name_to_id=CATEGORY_NAMES), None


        class TestBroken(AttributeLoaderContract):
            def store(self, root, samples):
                return ScopeRows({s.uid: (s.tags, s.category_ids) for s in samples}), None
    """)
    assert_caught(run, "test_a_scoped_load_fills_those_sources_rows_as_a_whole_load_does[one]",
                  "test_a_scoped_load_fills_those_sources_rows_as_a_whole_load_does[last]")


def test_the_encoder_kit_catches_values_that_carry_over_between_records(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import numpy as np

        from kuration.testing import OutputEncoderContract


        class Speed:
            def timestep(self, record, ctx):
                return {"speed2": np.float32(2 * record["speed"])}


        class DistanceSoFar:
            def __init__(self):
                self.travelled = 0.0

            def timestep(self, record, ctx):  # the bug: a value that depends on the records before
                self.travelled += abs(float(record["speed"])) / 10
                return {"speed2": np.float32(self.travelled)}


        class Kit(OutputEncoderContract):
            def modalities(self):
                return {"speed2": {"dtype": "float32", "shape": [], "source": "encoder:speed2"}}


        class TestGood(Kit):
            def make_encoder(self):
                return Speed()


        class TestBroken(Kit):
            def make_encoder(self):
                return DistanceSoFar()
    """)
    assert_caught(run, "test_a_records_values_depend_on_that_record_alone")


def test_the_recipe_kit_catches_an_undeclared_reason_bit(pytester, monkeypatch):
    run = run_plugin_tests(pytester, monkeypatch, """
        import dataclasses

        import numpy as np

        from kuration.testing import RolloutRecipeContract
        from tests.rollouts.user_recipes import OneStepRecipe


        class StrayBit(OneStepRecipe):
            def records_for_shard(self, arrays, source):  # the bug: bit 5 means nothing in reason_codes
                out = []
                for record in super().records_for_shard(arrays, source):
                    step = record.steps[0]
                    shell = dataclasses.replace(step.shell, valid_action=np.array([False, True]),
                                                reason_bits=np.array([1 << 5, 0], np.uint32),
                                                labels=np.float32([np.nan, 1]), label_valid=np.array([False, True]))
                    out.append(dataclasses.replace(record, steps=(dataclasses.replace(step, shell=shell),)))
                return out


        def line(rows, step):
            return {"pos": np.arange(rows, dtype=np.float32)[:, None] * np.float32(step)}


        class Kit(RolloutRecipeContract):
            def shards(self):
                return [line(6, [1, 0, 0]), line(4, [0, 1, 0])]


        class TestGood(Kit):
            def make_recipe(self):
                return OneStepRecipe()


        class TestBroken(Kit):
            def make_recipe(self):
                return StrayBit()
    """)
    assert_caught(run, "test_every_reason_bit_is_declared")
