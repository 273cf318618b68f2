"""The gallery (docs/gallery.md): its figures are made by the examples and show in the pages.

- Without Sphinx: every figure the page embeds is written by a script that conf.py runs,
  and each such script, run as the build runs it (`--figures DIR`), writes non-blank PNGs
  whose axes carry labels, the ones taken from data checked against the attrs the
  script gave its data.
- With Sphinx and MyST (the `docs` extra; skipped without): the docs build with -W and
  every <img> of the gallery page points at a PNG of plausible size in the build.
- With a headless Chromium or Chrome (skipped without): a screenshot of the page,
  compared with one of the same page with its images hidden, shows the figures drawn.
"""

import ast
import html.parser
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GALLERY = DOCS / "gallery.md"
FIGURE = re.compile(r"^```\{figure\} _figures/(?P<stem>[\w]+)/(?P<name>[\w]+\.png)$", re.M)


def conf_value(name: str):
    """A literal assigned in docs/conf.py, read without importing it (no Sphinx needed)."""
    for node in ast.parse((DOCS / "conf.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"docs/conf.py assigns no {name}")


def embedded() -> dict[str, list[str]]:
    """{script stem: [PNG names]} of the figures gallery.md embeds."""
    figures: dict[str, list[str]] = {}
    for match in FIGURE.finditer(GALLERY.read_text()):
        figures.setdefault(match["stem"], []).append(match["name"])
    return figures


SCRIPTS = conf_value("example_figures_scripts")


def test_gallery_embeds_the_figures_the_build_makes():
    figures = embedded()
    assert sum(map(len, figures.values())) >= 5, figures
    stems = {Path(script).stem for script in SCRIPTS}
    assert set(figures) == stems, (sorted(figures), sorted(stems))  # no script runs for nothing
    for script in SCRIPTS:
        assert (ROOT / script).is_file(), script
    # every example that takes --figures is in the gallery
    takes_figures = {p.stem for p in (ROOT / "examples").glob("*.py") if '"--figures"' in p.read_text()}
    assert takes_figures == stems, (sorted(takes_figures), sorted(stems))
    assert "gallery" in (DOCS / "index.md").read_text().split("```{toctree}")[1]


def check_png(path: Path) -> np.ndarray:
    """A PNG of plausible size that is not blank; its pixels (height, width, channels)."""
    from matplotlib import image

    assert path.stat().st_size > 10_000, (path, path.stat().st_size)
    pixels = image.imread(path)
    height, width = pixels.shape[:2]
    assert 300 <= width <= 2500 and 250 <= height <= 2000, (path, pixels.shape)
    grey = pixels[..., :3].mean(axis=-1)
    assert grey.std() > 0.05 and (grey < 0.5).mean() > 0.005, path  # something drawn on the white
    return pixels


# (figure, index of the axes): (xlabel, ylabel), as xarray derives them from the attrs that
# the script gives its data (the oracle: those attrs, not the implementation's output)
EXPECTED_LABELS = {
    ("heat_kernel.png", 0): ("x_wrt [m]", "x [m]"),  # X's units, kept by jacrev on x_wrt
    ("dask_throughput.png", 0): ("samples per chunk", "throughput [samples/s]"),
    ("dask_throughput.png", 1): ("time since start [s]", "share of the tasks done [1]"),
    ("per_sample_gradients.png", 0): ("sample", "feature"),
    ("calibration.png", 0): ("time [day]", "population [cells]"),  # from the model's attrs
    ("ishigami_gradients.png", 2): ("input x3", "∂f/∂x3 per sample"),  # from the long_names
    ("quickstart.png", 0): ("t [s]", "sensor voltage [mV]"),
    ("sobol_bars.png", 0): ("param", "Sobol' index [1]"),
    ("sobol_st_maps.png", 0): ("longitude [degrees_east]", "latitude [degrees_north]"),  # from the coords' attrs
    ("sobol_st_maps.png", 3): ("", "total order Sobol' index\n(Jansen 1999) [1]"),  # the colour bar (wrapped)
}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: Path(s).stem)
def test_example_writes_its_figures(script, tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    axes_labels: dict[str, list[tuple[str, str, str]]] = {}
    savefig = Figure.savefig

    def recording_savefig(fig, fname, *args, **kwargs):
        axes_labels[Path(fname).name] = [(ax.get_label(), ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]
        return savefig(fig, fname, *args, **kwargs)

    # run as the docs build runs it (`SCRIPT --figures DIR`), in this process to see the figures
    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    monkeypatch.setattr(sys, "argv", [script, "--figures", str(tmp_path)])
    monkeypatch.syspath_prepend(str(ROOT))
    runpy.run_path(str(ROOT / script), run_name="__main__")

    expected = embedded()[Path(script).stem]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(expected)
    for name in expected:
        check_png(tmp_path / name)
        for kind, xlabel, ylabel in axes_labels[name]:
            assert ylabel.strip(), (name, kind)  # colour bars too
            assert kind == "<colorbar>" or xlabel.strip(), (name, kind)
    for (name, index), labels in EXPECTED_LABELS.items():
        if name in axes_labels:
            assert axes_labels[name][index][1:] == labels, (name, index, axes_labels[name])


class ImageSources(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory) -> Path:
    """The HTML docs, built as `make docs` builds them (warnings are errors)."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("html")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(DOCS), str(out)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return out


@pytest.mark.slow
def test_gallery_page_shows_every_figure(built_docs):
    page = built_docs / "gallery.html"
    parser = ImageSources()
    parser.feed(page.read_text())
    sources = [image["src"] for image in parser.images]
    assert len(sources) == sum(map(len, embedded().values())), sources
    assert sorted(Path(src).name for src in sources) == sorted(n for names in embedded().values() for n in names)
    for image in parser.images:
        assert len(image.get("alt", "")) > 20, image  # a description for screen readers
        check_png(page.parent / image["src"])


def browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        if found := shutil.which(name):
            return found
    return None


def screenshot(page: Path, png: Path) -> np.ndarray:
    from matplotlib import image

    proc = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={png}", "--window-size=1280,4800", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and png.is_file(), proc.stderr
    return image.imread(png)[..., :3]


def decoded_sizes(page: Path) -> list[str]:
    """"natural width x natural height x shown width" of each <img>, as the browser decoded them."""
    probe = page.with_name("gallery_probe.html")
    script = ('<script>window.addEventListener("load", () => { for (const i of document.images) '
              'i.setAttribute("data-decoded", i.naturalWidth + "x" + i.naturalHeight + "x" + i.width); });</script>')
    probe.write_text(page.read_text().replace("</head>", script + "</head>"))
    proc = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           "--window-size=1280,4800", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return re.findall(r'data-decoded="([^"]*)"', proc.stdout)


def coloured(pixels: np.ndarray) -> int:
    """Pixels far from any grey: the plots' colours (the theme's text and links are few)."""
    return int(((pixels.max(axis=-1) - pixels.min(axis=-1)) > 0.25).sum())


@pytest.mark.slow
def test_gallery_renders_in_a_headless_browser(built_docs, tmp_path):
    if browser() is None:
        pytest.skip("no headless Chromium or Chrome on this machine")
    page = built_docs / "gallery.html"
    # each image decoded by the browser at the size of its PNG, and shown wide enough to read
    parser = ImageSources()
    parser.feed(page.read_text())
    decoded = decoded_sizes(page)
    assert len(decoded) == len(parser.images), decoded
    for image, sizes in zip(parser.images, decoded):
        height, width = check_png(page.parent / image["src"]).shape[:2]
        natural_width, natural_height, shown_width = map(int, sizes.split("x"))
        assert (natural_width, natural_height) == (width, height), (image["src"], sizes)
        assert shown_width >= 400, (image["src"], sizes)
    shown = screenshot(page, tmp_path / "gallery.png")
    # the same page with its images hidden: what the screenshot would be if none rendered
    hidden_page = page.with_name("gallery_hidden_images.html")
    hidden_page.write_text(page.read_text().replace("</head>", "<style>img {visibility: hidden}</style></head>"))
    hidden = screenshot(hidden_page, tmp_path / "gallery_hidden_images.png")
    assert shown.shape == hidden.shape
    # five figures of 1000 x 450 pixels or so, scaled into the page: many coloured pixels
    assert coloured(shown) > coloured(hidden) + 50_000, (coloured(shown), coloured(hidden))
    rows = np.flatnonzero(np.abs(shown - hidden).max(axis=(1, 2)) > 0.1)  # where the images changed the page
    assert rows.size > 0 and rows.max() - rows.min() > 1500, rows  # spread down the page, not one corner
