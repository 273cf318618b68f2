"""Every ```python block of README.md and docs/*.md runs, and prints what it says; the
docs site's configuration and page tree hold together.

A block with `>>>` prompts is a doctest: its expected output and exceptions are
checked (whitespace normalised, `...` matches anything in ordinary output). An
exception shows its class and its whole message, wrapped over several lines where it is
long: the rendered page shows what the user will read, the problem and its fix, and the
test fails when the message changes. In a message only the location, which depends on
where the code runs (`at <file>:<line>`), is written `...`; any other `...` must be in
the message itself. Any other ```python block is executed and must not raise. Each
block is self-contained: it runs in a fresh namespace, so it imports what it uses.
Code that is not meant to run goes in a ```text block.
"""

import ast
import doctest
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
DOCTEST_FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
# Where the doctests ran (`<doctest limitations.md[4]>:2`): the one part of an exception
# message that the pages write as `...`.
LOCATION = re.compile(r"<doctest [^>]*>:\d+")
# Pages whose exception messages may still be cut with `...`: none now, every page shows
# whole messages.
ELIDED_MESSAGES_ALLOWED: set[str] = set()


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


class WholeMessageChecker(doctest.OutputChecker):
    """Exception messages are compared whole: `...` stands for the location only."""

    def __init__(self, exception_messages: set[str]):
        self.exception_messages = exception_messages

    def check_output(self, want, got, optionflags):
        if want in self.exception_messages:
            got = LOCATION.sub("...", got)
            optionflags &= ~doctest.ELLIPSIS
        return super().check_output(want, got, optionflags)


def run_doctest(path, first_line, code):
    test = doctest.DocTestParser().get_doctest(
        code, globs={"__name__": "__doc_block__"}, name=path.name, filename=str(path), lineno=first_line
    )
    report = []
    if path.name in ELIDED_MESSAGES_ALLOWED:
        checker = None
    else:
        checker = WholeMessageChecker({ex.exc_msg for ex in test.examples if ex.exc_msg is not None})
    runner = doctest.DocTestRunner(checker=checker, optionflags=DOCTEST_FLAGS)
    result = runner.run(test, out=report.append, clear_globs=True)
    assert result.failed == 0, "".join(report)


def test_whole_message_checker_refuses_a_cut_message():
    message = "ValueError: vmap over dim 'x': no argument has it (at <doctest p.md[1]>:2); pass axis_size=\n"
    checker = WholeMessageChecker({"ValueError: vmap over dim 'x': no argument has it (at ...); pass ...\n",
                                   "ValueError: vmap over dim 'x': no argument has it (at ...); pass\naxis_size=\n"})
    assert not checker.check_output("ValueError: vmap over dim 'x': no argument has it (at ...); pass ...\n",
                                    message, DOCTEST_FLAGS)
    assert checker.check_output("ValueError: vmap over dim 'x': no argument has it (at ...); pass\naxis_size=\n",
                                message, DOCTEST_FLAGS)
    # ordinary output keeps ELLIPSIS
    assert checker.check_output("[1, ..., 9]\n", "[1, 2, 9]\n", DOCTEST_FLAGS)


# --- the site: conf.py, the page tree, the installation page ---------------------------

DOCS = ROOT / "docs"


def conf_values() -> dict:
    """The literals that docs/conf.py assigns, read without importing it (no Sphinx needed)."""
    values = {}
    for node in ast.parse((DOCS / "conf.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass  # not a literal (an f-string, a call)
    return values


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_conf_has_copy_buttons_maths_and_its_static_files():
    conf = conf_values()
    assert "sphinx_copybutton" in conf["extensions"]
    assert "sphinx.ext.mathjax" in conf["extensions"]
    assert {"dollarmath", "amsmath"} <= set(conf["myst_enable_extensions"])
    # the copy button strips the prompts of doctests and shell commands, and nothing else
    prompt = re.compile(conf["copybutton_prompt_text"]) if conf["copybutton_prompt_is_regexp"] else None
    assert prompt is not None
    for line, code in [(">>> x = 1", "x = 1"), ("...     return x", "    return x"), ("$ pip install -e .", "pip install -e .")]:
        assert prompt.match(line) and line[prompt.match(line).end():] == code, line
    assert not prompt.match("x = 1") and not prompt.match("...")  # an output line, a traceback's "..."
    for css in conf["html_css_files"]:
        assert any((DOCS / folder / css).is_file() for folder in conf["html_static_path"]), css
    for templates in conf["html_sidebars"].values():
        for template in templates:
            assert any((DOCS / folder / template).is_file() for folder in conf["templates_path"]), template


def test_docs_extra_installs_every_extension():
    docs_extra = " ".join(pyproject()["project"]["optional-dependencies"]["docs"])
    packages = {"myst_parser": "myst-parser", "sphinx_copybutton": "sphinx-copybutton"}
    for extension in conf_values()["extensions"]:
        if extension in packages:
            assert packages[extension] in docs_extra, extension
        else:  # Sphinx's own, or docs/_ext
            assert extension.startswith("sphinx.ext.") or (DOCS / "_ext" / f"{extension}.py").is_file(), extension
    assert "pydata-sphinx-theme" in docs_extra and conf_values()["html_theme"] == "pydata_sphinx_theme"


TOCTREE = re.compile(r"^```\{toctree\}[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def toctree_entries(page: Path) -> list[str]:
    """The documents a page's toctrees list (`Title <name>` gives `name`), in order."""
    entries = []
    for block in TOCTREE.findall(page.read_text(encoding="utf-8")):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                match = re.fullmatch(r".*<(.+)>", line)
                entries.append(match[1] if match else line)
    return entries


def test_every_page_is_in_one_toctree():
    excluded = {pattern for pattern in conf_values()["exclude_patterns"] if pattern.endswith(".md")}
    pages = {p.stem for p in DOCS.glob("*.md") if p.name not in excluded}
    listed: dict[str, str] = {}
    for page in sorted(DOCS.glob("*.md")):
        for entry in toctree_entries(page):
            assert (DOCS / f"{entry}.md").is_file(), (page.name, entry)
            assert entry not in listed, f"{entry} is in the toctrees of {listed[entry]} and {page.stem}"
            listed[entry] = page.stem
    assert set(listed) == pages - {"index"}, sorted(pages - {"index"} - set(listed))


def test_navbar_shows_every_section():
    """The navbar shows index.md's toctree; past header_links_before_dropdown it hides the rest under "More"."""
    sections = toctree_entries(DOCS / "index.md")
    options = conf_values()["html_theme_options"]
    assert 4 <= len(sections) <= options["header_links_before_dropdown"], sections
    assert {"installation", "user_guide", "reference", "gallery"} <= set(sections)
    assert conf_values()["html_sidebars"] == {"**": ["sidebar-nav-full.html"]}  # the whole tree, on every page
    assert "startdepth=0" in (DOCS / "_templates" / "sidebar-nav-full.html").read_text()


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_pages_link_by_title_not_by_file_name(page):
    # [](vmap.md) shows the page's title (a heading's, with #anchor); [vmap.md](vmap.md)
    # showed its file name. (README.md is read on GitHub, where [](...) shows nothing.)
    text = page.read_text(encoding="utf-8")
    by_file_name = re.findall(r"\[[^\]]*\.md(?:#[^\]]*)?\]\(", text)
    assert not by_file_name, by_file_name


def test_installation_page_covers_every_extra_and_the_wheel():
    text = (DOCS / "installation.md").read_text(encoding="utf-8")
    project = pyproject()["project"]
    for extra in project["optional-dependencies"]:
        assert f"[{extra}]" in text, extra
    # the wheel's file name: the project name normalised (labeled-func -> labeled_func)
    wheel_name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    assert f"dist/{wheel_name}-*.whl" in text
    import labeled_func

    assert f"print(lf.__version__)\"\n{labeled_func.__version__}\n" in text
    assert f"python>={project['requires-python'].removeprefix('>=')}" in text  # the conda environment
    for dependency in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", dependency)[0]
        assert f"  - {name}" in text, f"environment.yml lacks {name}"


@pytest.mark.parametrize("path", [ROOT / "README.md", DOCS / "vmap.md"], ids=lambda p: p.name)
def test_vmap_signature_shown_is_the_real_one(path):
    import inspect

    import labeled_func as lf

    shown = re.search(r"lf\.vmap\((func, dim=None, \*,[^)]*)\)", path.read_text(encoding="utf-8"))
    assert shown, f"{path.name} shows no signature of lf.vmap"
    params = ast.parse(f"def vmap({shown[1]}): pass").body[0].args
    names = [a.arg for a in params.args + params.kwonlyargs]
    defaults = [ast.literal_eval(d) for d in params.defaults + params.kw_defaults]
    real = inspect.signature(lf.vmap).parameters
    assert names == list(real)
    assert defaults == [p.default for p in real.values() if p.default is not inspect.Parameter.empty]
