"""``scripts/ui.sh``'s options: checked before it installs or starts anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "scripts" / "ui.sh"), *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def test_help_names_every_option_and_exits_0():
    done = _ui("--help")
    assert done.returncode == 0
    for option in ("--landing", "--storage", "--config", "--plugins", "--plugin-path", "--port"):
        assert option in done.stdout
    assert "set -euo" not in done.stdout  # the usage is the comment block, not the script


def test_an_unknown_option_or_a_missing_value_is_a_usage_error():
    done = _ui("--landig", "x")
    assert done.returncode == 2 and "unknown option --landig" in done.stderr and "--landing" in done.stderr
    done = _ui("--landing")
    assert done.returncode != 0 and "--landing needs a folder or URL" in done.stderr


def test_a_remote_storage_root_needs_dagster_home(tmp_path):
    env_free = subprocess.run(
        ["env", "-u", "DAGSTER_HOME", "bash", str(REPO / "scripts" / "ui.sh"), "--storage", "s3://bucket/k"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert env_free.returncode == 2 and "a remote --storage needs DAGSTER_HOME" in env_free.stderr
