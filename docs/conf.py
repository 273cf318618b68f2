"""Sphinx configuration: the markdown pages of docs/ (MyST) and the API from the docstrings.

Build with `make docs` (sphinx-build -W: every warning is an error).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # an uninstalled checkout documents itself
sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # example_figures: the gallery's figures

import labeled_func  # noqa: E402

project = "labeled_func"
author = "labeled_func contributors"
release = version = labeled_func.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "example_figures"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# included by performance.md and limitations.md
exclude_patterns = ["_build", "_figures", "performance_table.md", "supported_table.md"]

nitpicky = False
myst_enable_extensions = ["deflist"]  # "term\n: definition" lists (performance.md)
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_numpy_docstring = True
napoleon_google_docstring = False

# gallery.md: these scripts run at build time (`SCRIPT --figures docs/_figures/<stem>/`) and
# the page shows the PNGs they write, computed by the library on every build.
example_figures_scripts = [
    "examples/dgsm_salib.py",
    "examples/per_sample_gradients.py",
    "examples/heat_equation.py",
    "examples/dask_throughput.py",
    "examples/calibrate_scipy.py",
    "examples/ishigami_dgsm.py",
    "examples/quickstart.py",
]
example_figures_dir = "_figures"

# xarray's theme: long code lines scroll instead of being cut
html_theme = "pydata_sphinx_theme"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_title = f"labeled_func {release}"
