"""The fenced code blocks of README.md and docs/*.md, and the runner that executes them.

Every block has an info string, and the info string says what running it means:

- ``python``: executed; the blocks of one file share one namespace, in order, as a reader
  who pastes them into one session would run them;
- ``text`` right after a ``python`` block: what that block prints, compared whole;
- ``bash``: every command runs and must exit 0;
- ``console``: each ``$ command`` runs and must exit 0; the lines after it are its output,
  compared whole;
- ``json NAME`` (``curation.json``, ``quality.json``): the file's format, read by the
  reader Kuration reads that file with;
- ``text layout``: the README's layout map; every path in it exists and every package is in it;
- ``text diagram``: a drawing of modules; every ``name.py`` it names exists and every
  snake_case name it uses is in that package's source.

In compared output a line ``...`` stands for any number of lines, and ``...`` inside a
line for any text. A block of another kind, or without an info string, fails the test
rather than being skipped.

The runner (``python -m tests.docs_blocks STEPS.json``) runs one file's blocks in order in
the working directory it is started in (see :mod:`tests.test_docs` for what that holds)
and stops at the first that fails, naming it by file and line.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_block(first_line: str) -> str:
    """The README's Python code block that starts with ``first_line`` (the kit test runs
    the plugin and kit blocks this way, and the docs test checks it finds the same block)."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    found = [block for block in blocks if block.startswith(first_line)]
    assert len(found) == 1, f"{len(found)} README blocks start with {first_line!r}"
    return found[0]

#: The info strings a block may carry; "json" takes the name of the file it shows.
KINDS = ("python", "bash", "console", "text", "text layout", "text diagram", "json")
#: The files whose format a ``json NAME`` block may show.
JSON_FILES = ("curation.json", "quality.json")


@dataclass(frozen=True)
class Block:
    """One fenced block: its file (relative to the repository), the line its fence opens
    on, its info string and its text."""

    doc: str
    line: int
    info: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


def doc_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order. A fence must open at the start of a line and
    be closed: an indented or unclosed fence raises, so no block goes unseen."""
    doc = path.relative_to(REPO).as_posix()
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            if line.startswith(" "):
                raise ValueError(f"{doc}:{i + 1}: an indented fence; open code blocks at the start of a line")
            start, info = i, line[3:].strip()
            i += 1
            while i < len(lines) and lines[i].rstrip() != "```":
                i += 1
            if i == len(lines):
                raise ValueError(f"{doc}:{start + 1}: the block is never closed")
            found.append(Block(doc, start + 1, info, "\n".join(lines[start + 1:i]) + "\n"))
        i += 1
    return found


def kind(block: Block) -> str:
    """The block's kind (one of :data:`KINDS`), or ValueError saying what info strings exist."""
    if block.info in KINDS and block.info != "json":
        return block.info
    if block.info.startswith("json ") and block.info.split(None, 1)[1] in JSON_FILES:
        return "json"
    raise ValueError(f"{block.where}: info string {block.info!r}; use one of {list(KINDS)} "
                     f"(json with the file it shows: {list(JSON_FILES)})")


def expected_output_pattern(expected: str) -> re.Pattern[str]:
    """A pattern that matches the whole output ``expected`` shows (``...`` as above)."""
    parts = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line.rstrip()).replace(r"\.\.\.", "[^\n]*?") + r"\n")
    return re.compile("".join(parts))


def output_matches(expected: str, actual: str) -> bool:
    text = "".join(line.rstrip() + "\n" for line in actual.rstrip("\n").splitlines())
    return expected_output_pattern(expected).fullmatch(text) is not None


def commands(block: Block) -> list[tuple[str, str | None]]:
    """``(command, expected output)`` for a bash block (output not shown: None) or a console
    block (the lines after each ``$ `` command); a line ending in a backslash continues."""
    out: list[tuple[str, list[str] | None]] = []
    pending: list[str] = []
    for line in block.text.splitlines():
        if pending:
            pending.append(line)
        elif block.info == "bash":
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pending.append(line)
        elif line.startswith("$ "):
            pending.append(line[2:])
        elif out and (shown := out[-1][1]) is not None:
            shown.append(line)
            continue
        else:
            raise ValueError(f"{block.where}: output before the first '$ ' command: {line!r}")
        if not pending[-1].endswith("\\"):
            out.append(("\n".join(pending), None if block.info == "bash" else []))
            pending = []
    return [(command, None if shown is None else "".join(f"{line}\n" for line in shown)) for command, shown in out]


# -- the runner ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One block to run, and for a python block the output the next block shows (or None)."""

    block: Block
    expected: str | None = None


def steps(path: Path, not_run: set[tuple[str, str]]) -> list[Step]:
    """The steps of ``path``'s blocks in order: every block but those named in ``not_run``
    (``(doc, first line)``), a ``text`` block becoming the expected output of the python
    block before it."""
    out: list[Step] = []
    for block in blocks(path):
        what = kind(block)
        if (block.doc, block.first_line) in not_run:
            continue
        if what == "text":
            if not out or kind(out[-1].block) != "python" or out[-1].expected is not None:
                raise ValueError(f"{block.where}: a plain text block shows what the python block right "
                                 "before it prints; there is none (mark a drawing 'text diagram')")
            out[-1] = Step(out[-1].block, block.text)
        else:
            out.append(Step(block))
    return out


def _fail(step: Step, message: str) -> None:
    raise SystemExit(f"{step.block.where} ({step.block.info}): {message}")


def _run_python(step: Step, namespace: dict) -> None:
    printed = io.StringIO()
    code = compile(step.block.text, step.block.where, "exec")
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)  # noqa: S102 - the docs' own examples, run as a reader runs them
    if step.expected is not None and not output_matches(step.expected, printed.getvalue()):
        _fail(step, f"printed\n{printed.getvalue()}\nwhere the docs show\n{step.expected}")


def _run_shell(step: Step) -> None:
    for command, expected in commands(step.block):
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            _fail(step, f"$ {command}\nexited {done.returncode}\n{done.stdout}\n{done.stderr}")
        if expected is not None and not output_matches(expected, done.stdout):
            _fail(step, f"$ {command}\nprinted\n{done.stdout}\nwhere the docs show\n{expected}")


def _check_json(step: Step) -> None:
    name = step.block.info.split(None, 1)[1]
    if name == "curation.json":
        from kuration.landing.curation_config import read_curation_file, resolve_curation_config

        with tempfile.TemporaryDirectory() as landing:
            (Path(landing) / "curation.json").write_text(step.block.text)
            resolve_curation_config(read_curation_file(landing, environ={}), environ={})
    elif name == "quality.json":
        from kuration.inspect.quality import parse_policy

        parse_policy(step.block.text, where=step.block.where)


def layout_problems(text: str) -> list[str]:
    """What is wrong with a layout map: paths that do not exist, packages it leaves out."""
    problems, listed = [], set()
    parent = ""
    for line in text.splitlines():
        name = line.split()[0]
        indent = len(line) - len(line.lstrip())
        path = name if indent == 0 else parent + name
        if indent == 0 and name.endswith("/"):
            parent = name
        listed.add(path.rstrip("/"))
        if not (REPO / path).exists():
            problems.append(f"{path} is in the layout map but not in the repository")
    packages = [p.parent for p in REPO.glob("*/__init__.py")] + [p.parent for p in REPO.glob("kuration/*/__init__.py")]
    for package in packages:
        if package.relative_to(REPO).as_posix() not in listed:
            problems.append(f"{package.relative_to(REPO).as_posix()}/ is a package the layout map leaves out")
    return problems


def diagram_problems(text: str) -> list[str]:
    """Modules a drawing names that do not exist, and snake_case names no module of theirs holds."""
    package = REPO / "kuration" / "rollouts"
    source = "\n".join(p.read_text() for p in package.glob("*.py"))
    problems = [f"{name} is not a module of kuration/rollouts" for name in re.findall(r"\b(\w+\.py)\b", text)
                if not (package / name).exists()]
    snake_case = set(re.findall(r"\b[a-z]+(?:_[a-z0-9]+)+\b", text))
    problems += [f"{name} is nowhere in kuration/rollouts" for name in sorted(snake_case) if name not in source]
    return problems


def run(all_steps: list[Step]) -> None:
    namespace: dict = {"__name__": "__docs__"}
    for step in all_steps:
        what = kind(step.block)
        if what == "python":
            _run_python(step, namespace)
        elif what in ("bash", "console"):
            _run_shell(step)
        elif what == "json":
            _check_json(step)
        elif what == "text layout":
            if problems := layout_problems(step.block.text):
                _fail(step, "; ".join(problems))
        elif what == "text diagram":
            if problems := diagram_problems(step.block.text):
                _fail(step, "; ".join(problems))
        print(f"ran {step.block.where} ({step.block.info})", file=sys.stderr)


def write_steps(all_steps: list[Step], path: Path) -> None:
    path.write_text(json.dumps([{"block": asdict(s.block), "expected": s.expected} for s in all_steps]))


def main(argv: list[str]) -> int:
    all_steps = [Step(Block(**s["block"]), s["expected"]) for s in json.loads(Path(argv[0]).read_text())]
    run(all_steps)
    # pyarrow can abort the interpreter at exit while its threads still hold objects
    # (apache/arrow#34314); collecting them first lets it exit normally
    gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
