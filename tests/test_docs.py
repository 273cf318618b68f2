"""Every ```python block of README.md and docs/*.md runs, and prints what it says.

A block with `>>>` prompts is a doctest: its expected output and exceptions are
checked (whitespace normalised, `...` matches anything). An exception shows its class
and the first line of its message (long ones cut with `...`): the rendered page shows
what the user will read, and the test fails when the message changes. Any other ```python block is executed and must not raise. Each
block is self-contained: it runs in a fresh namespace, so it imports what it uses.
Code that is not meant to run goes in a ```text block.
"""

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
DOCTEST_FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def collect_blocks():
    """(id, path, first line of the code, code) for every ```python block."""
    blocks = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for number, match in enumerate(FENCE.finditer(text), start=1):
            first_line = text.count("\n", 0, match.start(1))  # 0-based line of the code
            blocks.append((f"{path.name}:{number}", path, first_line, match.group(1)))
    return blocks


BLOCKS = collect_blocks()


def test_docs_have_python_blocks():
    named = {path.name for _, path, _, _ in BLOCKS}
    assert {"README.md", "index.md", "vmap.md", "limitations.md", "random_control_flow.md"} <= named


@pytest.mark.parametrize(
    "path, first_line, code", [block[1:] for block in BLOCKS], ids=[block[0] for block in BLOCKS]
)
def test_doc_block(path, first_line, code):
    if re.search(r"^\s*>>>", code, re.MULTILINE):
        run_doctest(path, first_line, code)
    else:
        # Leading newlines make tracebacks point at the line of the markdown file.
        source = "\n" * first_line + code
        exec(compile(source, str(path), "exec"), {"__name__": "__doc_block__"})


def run_doctest(path, first_line, code):
    test = doctest.DocTestParser().get_doctest(
        code, globs={"__name__": "__doc_block__"}, name=path.name, filename=str(path), lineno=first_line
    )
    report = []
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
    result = runner.run(test, out=report.append, clear_globs=True)
    assert result.failed == 0, "".join(report)
