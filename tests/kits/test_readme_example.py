"""The README's kit example (section "Test your plugin with the contract kits") is a plugin
test that passes: run as its author would, with the README's plugin registering ``thermal``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path


pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


def readme_block(first_line: str) -> str:
    """The README's Python code block that starts with ``first_line``."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    found = [block for block in blocks if block.startswith(first_line)]
    assert len(found) == 1, f"{len(found)} README blocks start with {first_line!r}"
    return found[0]


def test_the_readme_kit_example_passes_the_media_provider_kit(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    plugin = readme_block("# my_plugins/drones.py")
    assert 'register_media_provider("thermal", NpyIndexProvider)' in plugin
    pytester.makepyfile(my_thermal_plugin=plugin)
    pytester.makeconftest("import my_thermal_plugin  # the plugin registers its provider on import\n")
    pytester.makepyfile(test_thermal=readme_block("# tests/test_thermal.py"))
    report = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", f"--junitxml={report}", timeout=300)
    cases = list(ElementTree.parse(report).getroot().iter("testcase"))
    failed = [case.get("name") for case in cases if any(child.tag in ("failure", "error") for child in case)]
    assert len(cases) > 30 and failed == [], "\n".join(result.outlines)
    assert result.ret == 0
