"""The README's Python example of a landing zone (open, score, plan, write, read) is at most
five lines besides its imports, and runs as written on a small landing zone."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np

from tests.output.corpus import version_dir

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (block,) = [b for b in blocks if "open_landing_zone(" in b]
    return block


def test_the_example_is_five_lines_open_score_plan_write_read():
    steps = [line for line in _example().splitlines() if line.strip() and not line.startswith(("from ", "import "))]
    assert len(steps) <= 5, steps
    assert [line.split("#")[-1].split(":")[0].strip() for line in steps] == ["open", "score", "plan", "write", "read"]


def test_the_example_runs_as_written(zone: Path, tmp_path: Path, monkeypatch):
    workdir = tmp_path / "work"
    workdir.mkdir()
    shutil.copytree(zone, workdir / "landing")
    monkeypatch.chdir(workdir)
    namespace: dict = {}
    exec(compile(_example(), str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    first = namespace["first"]
    assert set(namespace["zone"].spec.modalities) <= set(first) and first["_present"].any()
    assert isinstance(first["pos"], np.ndarray) and first["pos"].shape[1:] == (3,)
    assert (version_dir(workdir / "out" / "dataset") / "dataset.commit.json").exists()
