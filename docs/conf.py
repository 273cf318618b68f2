"""Sphinx configuration: the markdown pages of docs/ (MyST) and the API from the docstrings.

Build with `make docs` (sphinx-build -W: every warning is an error).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # an uninstalled checkout documents itself

import labeled_func  # noqa: E402

project = "labeled_func"
author = "labeled_func contributors"
release = version = labeled_func.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# included by performance.md and limitations.md
exclude_patterns = ["_build", "performance_table.md", "supported_table.md"]

nitpicky = False
myst_enable_extensions = ["deflist"]  # "term\n: definition" lists (performance.md)
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_numpy_docstring = True
napoleon_google_docstring = False

html_theme = "alabaster"
html_title = f"labeled_func {release}"
