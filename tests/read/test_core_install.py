"""``pip install kuration`` alone, as a training node installs it (issue 26): no Dagster, and
every container of a committed dataset reads, the demo's dataset included.

The project is built into a wheel from a copy of its packages (building in place would leave
``build/`` in the checkout), and installed with ``constraints.txt`` into a fresh venv; pip
takes the dependencies from its cache when ``scripts/bootstrap.sh`` has run on this machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from kuration.read import shard_entries
from tests.output.committed_datasets import build
from tests.ui.dagster_dev import DemoFolders

REPO = Path(__file__).resolve().parents[2]
#: What setuptools packs (pyproject.toml [tool.setuptools.packages.find]) and needs to build.
PACKED = ("pyproject.toml", "README.md", "kuration", "kuration_assets", "kuration_cli", "kuration_dagster_checks",
          "kuration_definitions", "kuration_resources", "splits_assets", "rollout_assets")

_READ_ALL = """
import json, sys
from kuration.core.loaders import iter_shards
counts = {path: sum(1 for _ in iter_shards(path, verify=True)) for path in sys.argv[1:]}
try:
    import dagster  # noqa: F401
    has_dagster = True
except ModuleNotFoundError:
    has_dagster = False
print(json.dumps({"counts": counts, "dagster": has_dagster}))
"""


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def core_python(tmp_path_factory) -> Path:
    """A venv holding ``kuration`` installed without extras."""
    root = tmp_path_factory.mktemp("core_install")
    source = root / "source"
    source.mkdir()
    for name in PACKED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, source / name)
    _pip(Path(sys.executable), "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "wheel"), str(source))
    (wheel,) = (root / "wheel").glob("kuration-*.whl")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    _pip(python, "install", "-c", str(REPO / "constraints.txt"), str(wheel))
    return python


def test_the_core_install_has_no_dagster_and_reads_every_container_and_the_demo(core_python, demo, tmp_path):
    """About a minute: it builds the wheel and installs the core's dependencies into a new
    venv (from pip's cache once bootstrap has run here), then reads the demo's dataset."""
    datasets = [build(tmp_path / container, container) for container in ("npz", "json", "hdf5", "parquet")]
    datasets.append(DemoFolders.under(demo.fresh()).storage / "dataset")
    done = subprocess.run([str(core_python), "-c", _READ_ALL, *map(str, datasets)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["dagster"] is False
    assert got["counts"] == {str(path): len(shard_entries(path)) for path in datasets}
    assert all(count > 0 for count in got["counts"].values())
    # the command line lists its verbs, and inspects the demo's dataset, without the Dagster layer
    kuration = core_python.parent / "kuration"
    listed = subprocess.run([str(kuration), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert listed.returncode == 0 and "check" in listed.stdout, listed.stderr[-3000:]
    checked = subprocess.run([str(kuration), "inspect", "--verify", str(datasets[-1])], capture_output=True, text=True,
                             cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-3000:]
