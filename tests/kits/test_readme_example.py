"""The README's kit example (section "Test your plugin with the contract kits") is a plugin
test that passes: run as its author would, with the README's plugin registering ``thermal``."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tests.docs_blocks import readme_block

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


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
