"""The worked example in docs/budget.md runs, and prints what the page says it prints."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "budget.md"


def test_the_worked_example_prints_what_the_docs_show():
    text = DOC.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    assert out.getvalue() == shown
