"""Every script in examples/ runs to completion, as `make demo` runs the quickstart."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
TIMEOUT_S = 120


def test_there_are_examples():
    assert any(script.name == "quickstart.py" for script in EXAMPLES)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda script: script.name)
def test_example_runs(script):
    # The repository root goes first on the path so that an uninstalled checkout works too.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, (
        f"{script.name} exited with {proc.returncode}\n"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
