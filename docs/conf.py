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

# sphinx.ext.mathjax renders the `$...$` / `$$...$$` formulas of the pages (MyST's dollarmath) with
# MathJax, loaded from its CDN (`mathjax_path`'s default): a reader offline sees the TeX source.
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx_copybutton", "example_figures"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# included by performance.md and limitations.md
exclude_patterns = ["_build", "_figures", "performance_table.md", "supported_table.md"]

nitpicky = False
myst_enable_extensions = [
    "deflist",  # "term\n: definition" lists (performance.md)
    "dollarmath",  # $inline$ and $$display$$ maths (sensitivity_salib.md)
    "amsmath",  # \begin{align} ... \end{align} blocks
]
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
    "examples/sobol_indices.py",
]
example_figures_dir = "_figures"

# The copy button of code blocks copies the code without its prompts (`>>> `, `... ` of the
# doctests, `$ ` of shell commands) and without the output lines that follow them.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True

# xarray's theme. The navbar shows the sections of index.md's toctree (Installation, User
# guide, Reference, Gallery, Examples, Contributing), none hidden under a "More" menu;
# the left sidebar shows the whole page tree on every page (_templates/sidebar-nav-full.html:
# the theme's own sidebar shows only the pages under the current section, empty for a
# page without subpages); _static/custom.css widens the text and wraps long code lines.
html_theme = "pydata_sphinx_theme"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 8,
    "show_nav_level": 2,  # the sections' pages unfolded in the sidebar
    "navigation_depth": 2,  # pages, not their headings (those are in the right-hand TOC)
}
html_sidebars = {"**": ["sidebar-nav-full.html"]}
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_title = f"labeled_func {release}"
