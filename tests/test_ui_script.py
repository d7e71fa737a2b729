"""``scripts/ui.sh``'s options, checked before it installs or starts anything, and the command it
ends in; ``scripts/check_defs.sh``, which the test command runs to validate the definitions."""

from __future__ import annotations

import os
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


def test_the_ui_is_served_by_dg_dev_without_telemetry_files():
    script = (REPO / "scripts" / "ui.sh").read_text()
    commands = [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands[-1] == 'exec .venv/bin/dg dev -w workspace.yaml -h 127.0.0.1 -p "$port"'
    # the telemetry-upload thread creates logs/ and .logs_queue/ in DAGSTER_HOME unless this is set
    assert "export DAGSTER_DISABLE_TELEMETRY=1" in commands
    assert commands.index("export DAGSTER_DISABLE_TELEMETRY=1") < len(commands) - 1


def _check_defs(landing: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KURATION_")}
    env["KURATION_LANDING_ZONE"] = str(landing)
    return subprocess.run(["bash", str(REPO / "scripts" / "check_defs.sh")], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=env)


def test_the_test_command_validates_the_definitions_before_pytest():
    script = (REPO / "scripts" / "test.sh").read_text()
    assert script.index("scripts/check_defs.sh") < script.index("-m pytest")


def test_check_defs_passes_on_the_definitions_and_names_what_fails_to_load(tmp_path):
    """Two loads of the code location by ``dg check defs``, about 10 s each on a quiet machine."""
    fine = _check_defs(tmp_path / "no_landing_zone_yet")
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "All definitions loaded successfully" in fine.stdout + fine.stderr
    (tmp_path / "curation.json").write_text('{"budjet": 1}')
    broken = _check_defs(tmp_path)
    assert broken.returncode == 1
    assert "unknown key(s) ['budjet']" in broken.stdout + broken.stderr
