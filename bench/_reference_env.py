"""Locate (and if needed build) the Cuvis.AI reference virtualenv ``bench/.venv-cuvis``.

The reference resolver lives in ``cuvis_ai_core.data.selectors`` and its models in
``cuvis_ai_schemas.training.data``. ``cuvis-ai-core`` declares torch, torchvision,
lightning, opencv and more as dependencies, but the two modules the benches use import
only the standard library, pydantic and (through ``cuvis_ai_schemas.training``) PyYAML.
So the venv is built with ``--no-deps`` for the two cuvis packages plus ``pydantic`` and
``pyyaml``: no torch, no CUDA wheels.

Set ``CUVIS_REFERENCE_PYTHON`` to use another interpreter that already has both packages,
or ``CUVIS_REFERENCE=off`` to skip the reference entirely (the benches then report
``"reference": null`` with the reason).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
VENV_DIR = BENCH_DIR / ".venv-cuvis"
CUVIS_PINS = ("cuvis-ai-core==0.18.6", "cuvis-ai-schemas==0.14.2")
# What the two imported modules actually need (cuvis-ai-schemas pins pydantic>=2.12.5,<3).
LIGHT_DEPS = ("pydantic>=2.12.5,<3", "pyyaml>=6.0.3")
_OFF = ("off", "0", "no", "false")  # values of CUVIS_REFERENCE / <PEER>_PEER that skip it
_PROBE = (
    "import cuvis_ai_core.data.selectors, cuvis_ai_core.utils.general;"
    "import cuvis_ai_schemas.training.data as d;"
    "import importlib.metadata as m, sys;"
    "heavy = sorted(k for k in ('torch', 'numpy', 'cv2') if k in sys.modules);"
    "print(m.version('cuvis-ai-core'), m.version('cuvis-ai-schemas'), m.version('pydantic'), heavy)"
)


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _probe(python: Path) -> tuple[bool, str]:
    try:
        out = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"cannot run {python}: {exc}"
    if out.returncode != 0:
        return False, f"{python} cannot import the reference modules: {out.stderr.strip().splitlines()[-1:]}"
    return True, out.stdout.strip()


def ensure_reference_python(*, build: bool = True) -> tuple[str | None, str]:
    """``(python_path, versions)`` of a working reference interpreter, or ``(None, reason)``."""
    if os.environ.get("CUVIS_REFERENCE", "").lower() in _OFF:
        return None, "reference disabled by CUVIS_REFERENCE=off"
    override = os.environ.get("CUVIS_REFERENCE_PYTHON")
    if override:
        ok, info = _probe(Path(override))
        return (override, info) if ok else (None, info)
    python = _venv_python(VENV_DIR)
    if python.exists():
        ok, info = _probe(python)
        if ok:
            return str(python), info
        if not build:
            return None, info
    elif not build:
        return None, f"{VENV_DIR} does not exist"
    failure = build_venv(VENV_DIR, [["--no-deps", *CUVIS_PINS], list(LIGHT_DEPS)])
    if failure:
        return None, failure
    ok, info = _probe(python)
    return (str(python), info) if ok else (None, info)


def ensure_peer_python(venv: Path, installs: list[list[str]], probe: str, *, off_variable: str,
                       timeout: float = 1800) -> tuple[str | None, str]:
    """``(python_path, how)`` of a peer's own virtualenv ``venv``, built on first use with
    ``pip install <args>`` for each entry of ``installs`` (see :func:`build_venv`), or
    ``(None, reason)`` when it cannot be had. ``probe`` is Python code that exits 0 only in a
    usable venv; ``off_variable=off`` in the environment skips the peer."""
    if os.environ.get(off_variable, "").lower() in _OFF:
        return None, f"peer disabled by {off_variable}=off"
    python = _venv_python(venv)

    def probe_failure() -> str | None:
        try:
            out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot run {python}: {exc}"
        return None if out.returncode == 0 else " | ".join(out.stderr.strip().splitlines()[-3:])

    if python.exists() and probe_failure() is None:
        return str(python), "existing venv"
    failure = build_venv(venv, installs, timeout=timeout)
    if failure:
        return None, failure
    failure = probe_failure()
    return (str(python), "built now") if failure is None else (None, f"{venv} was built but its probe fails: {failure}")


def build_venv(venv: Path, installs: list[list[str]], *, timeout: float = 600) -> str | None:
    """Create the virtualenv ``venv`` and run ``pip install <args>`` in it for each entry of
    ``installs``, in order; None when every step worked, else what failed."""
    python = _venv_python(venv)
    steps = [[sys.executable, "-m", "venv", str(venv)],
             *[[str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args] for args in installs]]
    for cmd in steps:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"building {venv} failed at {' '.join(cmd[2:])}: {exc}"
        if out.returncode != 0:
            tail = " | ".join(out.stderr.strip().splitlines()[-3:])
            return f"building {venv} failed at {' '.join(cmd[2:])}: {tail}"
    return None


def kuration_tree_state() -> dict:
    """The commit and whether kuration/ has uncommitted edits (results depend on both)."""
    repo = BENCH_DIR.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""

    dirty = git("status", "--porcelain", "--", "kuration")
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or None,
            "kuration_dirty_files": [line[3:] for line in dirty.splitlines() if line.strip()]}
