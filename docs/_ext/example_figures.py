"""Sphinx extension: run the example scripts at build time so the gallery shows their figures.

Each script named in the `example_figures_scripts` config value (paths relative to the
repository root) runs as `python SCRIPT --figures DIR` when the builder starts, before
any page is read, with DIR = `<docs>/<example_figures_dir>/<script's stem>`.  The pages
embed the PNGs from there with MyST `{figure}` directives, so a figure that a script
failed to write is a missing image, which `sphinx-build -W` turns into an error; a
script that fails stops the build with its output.  The figures are computed by the
library on every build, never committed (`*.png` is git-ignored).
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent.parent
TIMEOUT_S = 300


def run_examples(app) -> None:
    figures = Path(app.srcdir) / app.config.example_figures_dir
    # The repository root goes first on the path so that an uninstalled checkout documents itself.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "MPLBACKEND": "Agg"}
    for script in app.config.example_figures_scripts:
        target = figures / Path(script).stem
        shutil.rmtree(target, ignore_errors=True)  # no stale figure survives a failing script
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(ROOT / script), "--figures", str(target)], cwd=ROOT,
                                  env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as error:
            raise ExtensionError(f"example_figures: {script} ran past {TIMEOUT_S} s") from error
        if proc.returncode != 0:
            raise ExtensionError(f"example_figures: {script} exited with {proc.returncode}\n"
                                 f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        made = sorted(p.name for p in target.glob("*.png"))
        logger.info(f"example_figures: {script}: {', '.join(made) or 'no figure'} "
                    f"({time.perf_counter() - start:.1f} s)")


def setup(app) -> dict:
    app.add_config_value("example_figures_scripts", [], "env")
    app.add_config_value("example_figures_dir", "_figures", "env")
    app.connect("builder-inited", run_examples)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
