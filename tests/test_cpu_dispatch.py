"""The same inputs give the same bytes on every CPU.

numpy picks its SIMD kernels by CPU, and kernels differ where IEEE 754 leaves the result
open (the sign of a zero out of ``max``, a NaN's payload, the order of an unstable sort).
Each run here is a fresh process with numpy's dispatch narrowed by
``NPY_DISABLE_CPU_FEATURES``, as on a machine without AVX-512 (an AVX2 CPU) and one with the
baseline only, next to the machine's default. Every run must produce the same pinned plan
digests, the same plan, and a dataset whose shards, manifest and output-spec marker are
byte-identical (config.json and the commit record compared as the crash tests compare
them: without timestamps and resume counts), also when written with ``write_workers=2``,
and a rollout store whose every file (chunks, shards, ``zarr.json`` metadata and the
manifest sidecar) is byte-identical.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cpu_dispatch_run import write_recordings, write_workers_out
from tests.output.corpus import comparable_record, data_files

ROOT = Path(__file__).resolve().parents[1]
#: Where a run writes its rollout store: beside its dataset directory.
ROLLOUTS_SUFFIX = "_rollouts"


def _store_files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def _dispatch_targets() -> list[str]:
    from numpy._core._multiarray_umath import __cpu_dispatch__

    return list(__cpu_dispatch__)


def _configurations() -> dict[str, str | None]:
    """Name -> ``NPY_DISABLE_CPU_FEATURES`` value (None: the default dispatch). numpy refuses
    to disable a target it was not built to dispatch, so the values are built from its list."""
    targets = _dispatch_targets()
    out: dict[str, str | None] = {"default": None}
    # Disabling X86_V4 alone leaves numpy's AVX-512 targets enabled: name every one.
    avx512 = [t for t in targets if t == "X86_V4" or t.startswith("AVX512")]
    if avx512:
        out["no_avx512"] = " ".join(avx512)
    if targets:
        out["baseline"] = " ".join(targets)
    return out


def _run(name: str, disable: str | None, recordings: Path, out: Path) -> dict:
    env = dict(os.environ)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    env.pop("NPY_ENABLE_CPU_FEATURES", None)
    if disable is not None:
        env["NPY_DISABLE_CPU_FEATURES"] = disable
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-m", "tests.cpu_dispatch_run", str(recordings), str(out),
                           str(out.with_name(out.name + ROLLOUTS_SUFFIX))], cwd=ROOT,
                          env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{name} run failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(len(_configurations()) < 2, reason="this numpy dispatches no SIMD targets at run time")
def test_plans_and_datasets_are_byte_identical_across_simd_dispatch(tmp_path):
    recordings = tmp_path / "recordings"
    write_recordings(recordings)
    configurations = _configurations()
    with cf.ThreadPoolExecutor(len(configurations)) as pool:
        futures = {name: pool.submit(_run, name, disable, recordings, tmp_path / name)
                   for name, disable in configurations.items()}
        runs = {name: future.result() for name, future in futures.items()}

    default = runs["default"]
    if "no_avx512" in runs:  # the narrowing took effect, or the comparison would prove nothing
        assert not runs["no_avx512"]["cpu_features"]["X86_V4"]
    if default["cpu_features"].get("X86_V3"):
        assert not runs["baseline"]["cpu_features"]["X86_V3"]
    reference_files = data_files(tmp_path / "default")
    assert any(name.endswith(".npz") for name in reference_files)
    reference_store = _store_files(tmp_path / ("default" + ROLLOUTS_SUFFIX))
    assert "rollout_manifest.json" in reference_store and any("/c/" in key for key in reference_store)
    for name, run in runs.items():
        assert run["plan_digests"] == default["plan_digests"], (
            f"{name}: pinned plan digests differ from the default dispatch")
        assert run["written_plan"] == default["written_plan"], f"{name}: the written dataset's plan differs"
        files = data_files(tmp_path / name)
        assert sorted(files) == sorted(reference_files), f"{name}: other files than the default dispatch wrote"
        differing = sorted(k for k in files if files[k] != reference_files[k])
        assert not differing, f"{name}: bytes differ from the default dispatch in {differing[:5]}"
        assert comparable_record(tmp_path / name) == comparable_record(tmp_path / "default"), name
        in_workers = write_workers_out(tmp_path / name)
        assert data_files(in_workers) == reference_files, f"{name}: write_workers=2 wrote other bytes"
        assert comparable_record(in_workers) == comparable_record(tmp_path / "default"), name
        store = _store_files(tmp_path / (name + ROLLOUTS_SUFFIX))
        assert sorted(store) == sorted(reference_store), f"{name}: other rollout store files than the default wrote"
        differing = sorted(k for k in store if store[k] != reference_store[k])
        assert not differing, f"{name}: rollout store bytes differ from the default dispatch in {differing[:5]}"
