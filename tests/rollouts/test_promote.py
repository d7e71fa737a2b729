"""write_rollout_store_atomically: a runner killed mid-write leaves the previous store
byte-identical and readable; the next run cleans up and promotes; a failed verification
promotes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from kuration.errors import RolloutInputError, RolloutStoreError
from kuration.rollouts import RolloutZarrStoreReader, write_rollout_store_atomically
from kuration.rollouts.promote import recover_interrupted_promotion
from kuration.storage import temp_name
from tests.rollouts.store_factory import all_files
from tests.rollouts.writer_records import sample_records

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import kuration.rollouts.writer as writer
    from kuration.rollouts.promote import write_rollout_store_atomically
    from tests.rollouts.writer_records import sample_records

    dest, marker = sys.argv[1], Path(sys.argv[2])
    original = writer._write_array
    calls = []

    def slow_write(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(1)
        if len(calls) == 12:  # mid-write: some arrays of the temp store are on disk
            marker.write_text("mid-write")
            time.sleep(120)
        return out

    writer._write_array = slow_write
    write_rollout_store_atomically(dest, sample_records(seed=1))
""")


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_a_kill_mid_write_keeps_the_previous_store(tmp_path: Path) -> None:
    dest = tmp_path / "rollouts.zarr"
    first = write_rollout_store_atomically(dest, sample_records(seed=0))
    assert first.store_dir == str(dest.resolve()) and Path(first.manifest_path).is_file()
    before = all_files(dest)
    marker = tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(dest), str(marker)], cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the child ended before reaching the write"
            assert time.monotonic() < deadline, "the child never reached the mid-write point"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".kuration-tmp.rollouts.zarr.")]
    assert len(leftovers) == 1, leftovers  # the killed run's temp store, half written
    assert all_files(dest) == before
    reader = RolloutZarrStoreReader(dest)
    assert reader.manifest()["sidecar_sha256"] == first.manifest_sha256
    np.testing.assert_array_equal(reader.q_h_view(1.0)["td_return"], reader.q_h_view()["td_return"])

    second = write_rollout_store_atomically(dest, sample_records(seed=1))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".kuration-tmp.")] == []
    assert all_files(dest) != before  # the new records (other rewards, labels) are in
    reader = RolloutZarrStoreReader(dest)
    assert reader.manifest()["sidecar_sha256"] == second.manifest_sha256
    rewards = [s.reward for r in sample_records(seed=1) for s in r.steps]
    np.testing.assert_array_equal(reader.array("steps/reward"), np.array(rewards, np.float32))


def test_an_interrupted_promotion_is_rolled_back(tmp_path: Path) -> None:
    dest = tmp_path / "s"
    write_rollout_store_atomically(dest, sample_records())
    before = all_files(dest)
    pid = dead_pid()
    old = tmp_path / temp_name("s", f"{pid}-{'a' * 12}-old")
    verified_temp = tmp_path / temp_name("s", f"{pid}-{'b' * 12}")
    os.rename(dest, old)  # the runner died between its two renames
    verified_temp.mkdir()
    assert sorted(recover_interrupted_promotion(dest)) == sorted([old.name, verified_temp.name])
    assert all_files(dest) == before and not old.exists() and not verified_temp.exists()


def test_siblings_of_live_runners_and_other_stores_are_left_alone(tmp_path: Path) -> None:
    live = tmp_path / temp_name("s", f"{os.getppid()}-{'c' * 12}")
    other = tmp_path / temp_name("s.v2", f"{dead_pid()}-{'d' * 12}")
    live.mkdir()
    other.mkdir()
    write_rollout_store_atomically(tmp_path / "s", sample_records())
    assert live.exists() and other.exists()


def test_a_failed_write_leaves_the_previous_store_and_no_temp(tmp_path: Path) -> None:
    dest = tmp_path / "s"
    write_rollout_store_atomically(dest, sample_records())
    before = all_files(dest)
    with pytest.raises(RolloutInputError):
        write_rollout_store_atomically(dest, [])
    assert all_files(dest) == before
    assert [p.name for p in tmp_path.iterdir()] == ["s"]


def test_a_store_failing_validation_is_not_promoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Report:
        ok = False
        errors = ["candidates/valid_action[3]: flipped"]

    from kuration.rollouts import promote

    monkeypatch.setattr(promote, "validate_rollout_zarr_store", lambda store_dir, **_: Report())
    with pytest.raises(RolloutStoreError, match=r"fails validation \(1 errors: candidates/valid_action\[3\]"):
        write_rollout_store_atomically(tmp_path / "s", sample_records())
    assert list(tmp_path.iterdir()) == []
