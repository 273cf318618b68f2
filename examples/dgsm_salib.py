"""SALib's problem, samples and model into lf.sensitivity.dgsm, and the numbers beside SALib's.

    python examples/dgsm_salib.py                 # writes dgsm_bars.png into examples/output/
    python examples/dgsm_salib.py --figures DIR

The Ishigami function (A = 7, B = 0.1, inputs uniform on (−π, π)³), written as SALib
writes models: an (n, 3) array in, n outputs out.  `lf.sensitivity.dgsm` takes SALib's
`problem` dict, its (N, D) sample matrix and that model, and returns SALib's result
names (`vi`, `vi_std`, `dgsm`, `dgsm_conf`) beside its own (`vi_conf`, `ST_bound`).

Checks: ν_i and the bound C_i ν_i / Var Y against their closed forms (within the
bootstrap interval, doubled); the bound against the analytic total Sobol' indices
S_Ti (it must hold).  When SALib is installed, its finite-difference DGSM on the same
base points (`finite_diff.sample`, step 1 % of x, N (D + 1) model evaluations) is
printed beside lf's (N evaluations, exact derivatives), and `to_dataframe()` is
checked to carry SALib's `to_df()` columns; without SALib that part is skipped.

The figure: ν_i and the bound as bars with their 95 % bootstrap intervals, the closed
forms (and the total indices S_Ti under the bound) as markers, labelled from the
result's coords and attrs.
"""

import argparse
import textwrap
import time
from pathlib import Path

import numpy as np

import labeled_func as lf

A, B = 7.0, 0.1
PI = np.pi
PROBLEM = {"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[-PI, PI]] * 3}
N_BASE = 2**12
STEP = 0.01  # SALib's default finite-difference step, relative to x
OUTPUT = Path(__file__).resolve().parent / "output"


def ishigami(X: np.ndarray) -> np.ndarray:
    """SALib's convention: X has one row per sample and one column per parameter."""
    return np.sin(X[:, 0]) + A * np.sin(X[:, 1]) ** 2 + B * X[:, 2] ** 4 * np.sin(X[:, 0])


def analytic() -> dict:
    """ν_i, Var Y and the total indices S_Ti on U(−π, π)³ (E[x⁴] = π⁴/5, E[x⁶] = π⁶/7, E[x⁸] = π⁸/9)."""
    nu = np.array([(1 + 2 * B * PI**4 / 5 + B**2 * PI**8 / 9) / 2, A**2 / 2, 8 * B**2 * PI**6 / 7])
    variance = A**2 / 8 + B * PI**4 / 5 + B**2 * PI**8 / 18 + 1 / 2
    v1, v2, v13 = (1 + B * PI**4 / 5) ** 2 / 2, A**2 / 8, B**2 * PI**8 * (1 / 18 - 1 / 50)
    return {"vi": nu, "bound": 4 * nu / variance, "ST": np.array([v1 + v13, v2, v13]) / variance}


def main(figures_dir: Path = OUTPUT) -> None:
    exact = analytic()
    np.testing.assert_allclose(exact["ST"], [0.5576, 0.4424, 0.2437], atol=5e-5)  # the published totals
    X, design = base_points()
    lf.sensitivity.dgsm(ishigami, X[:100], problem=PROBLEM, num_resamples=2)  # warm-up: the first call sets up
    start = time.perf_counter()
    result = lf.sensitivity.dgsm(ishigami, X, problem=PROBLEM, num_resamples=100, seed=0)
    seconds = time.perf_counter() - start

    assert np.all(np.abs(result.vi.values - exact["vi"]) < 2 * result.vi_conf.values), result.vi.values
    assert np.all(np.abs(result.ST_bound.values - exact["bound"]) < 2 * result.dgsm_conf.values)
    assert np.all(result.ST_bound.values > exact["ST"]), "the DGSM bound of S_T must hold"

    frame = result.to_dataframe()
    print(f"lf.sensitivity.dgsm on Ishigami: N = {len(X)} base points, {len(X)} model evaluations, {seconds:.2f} s")
    print(frame.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"  analytic vi:       {format_row(exact['vi'])}")
    print(f"  analytic ST_bound: {format_row(exact['bound'])}   (= SALib's dgsm for uniform inputs)")
    print(f"  analytic S_T:      {format_row(exact['ST'])}   (the bound holds: ST_bound > S_T)")
    for figure in plot(result, exact, len(X), figures_dir) or ["skipped (matplotlib is not installed)"]:
        print(f"  figure: {figure}")
    if design is not None:
        compare_with_salib(X, design, frame)


def base_points():
    """SALib's finite-difference design and its base points when SALib is installed, else
    uniform random points (and no design)."""
    try:
        from SALib.sample import finite_diff
    except ImportError:
        print("SALib is not installed: lf alone on uniform random points (pip install SALib to compare)")
        return np.random.default_rng(0).uniform(-PI, PI, (N_BASE, 3)), None
    design = finite_diff.sample(PROBLEM, N_BASE, delta=STEP, seed=1)
    return design[:: len(PROBLEM["names"]) + 1], design   # each base point, then D perturbed copies


def compare_with_salib(X, design, frame) -> None:
    from SALib.analyze import dgsm as salib_dgsm

    start = time.perf_counter()
    salib = salib_dgsm.analyze(PROBLEM, design, ishigami(design), num_resamples=100, seed=1)  # seed=0 seeds nothing
    seconds = time.perf_counter() - start
    salib_frame = salib.to_df()
    assert list(frame.columns[:4]) == list(salib_frame.columns), (list(frame.columns), list(salib_frame.columns))
    assert list(frame.index) == list(salib_frame.index)
    # the same base points and Var Y: vi, vi_std and dgsm differ by the finite-difference error only
    for column in ("vi", "vi_std", "dgsm"):
        np.testing.assert_allclose(frame[column], salib_frame[column], rtol=0.05, err_msg=column)
    # SALib's dgsm_conf is the half-width of vi's interval (lf's vi_conf), not of dgsm's
    np.testing.assert_allclose(frame["vi_conf"], salib_frame["dgsm_conf"], rtol=0.3)

    print(f"SALib finite differences (step {STEP:.0%} of x) on the same base points: "
          f"{len(design)} model evaluations, {seconds:.2f} s")
    print(salib_frame.to_string(float_format=lambda v: f"{v:.4f}"))
    print("  checked: to_dataframe() starts with SALib's to_df() columns; vi, vi_std, dgsm within 5 %;"
          " SALib's dgsm_conf within 30 % of lf's vi_conf")


def format_row(values) -> str:
    return "  ".join(f"{v:8.4f}" for v in values)


def label(da) -> str:
    """An axis label from a DataArray's attrs (long_name, units) or its name."""
    text = da.attrs.get("long_name", da.name)
    text = f"{text} [{da.attrs['units']}]" if "units" in da.attrs else text
    return textwrap.fill(text, 40)


def plot(result, exact: dict, n_samples: int, directory: Path) -> list[Path]:
    """dgsm_bars.png: ν_i (left) and the bound of S_Ti (right) with their intervals."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = result.param.values.tolist()
    position = np.arange(len(names))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5), constrained_layout=True)
    left.bar(position, result.vi, yerr=result.vi_conf, capsize=6, color="tab:blue",
             label="lf.sensitivity.dgsm, 95 % interval")
    closed = {"marker": "_", "markersize": 40, "markeredgewidth": 2, "linestyle": "none", "color": "black"}
    left.plot(position, exact["vi"], **closed, label="closed form")
    left.set(ylabel=label(result.vi), title=f"ν_i from {n_samples} samples' exact gradients")
    right.bar(position, result.ST_bound, yerr=result.dgsm_conf, capsize=6, color="tab:orange",
              label="ST_bound, 95 % interval")
    right.plot(position, exact["bound"], **closed, label="closed form of the bound")
    right.plot(position, exact["ST"], "o", color="tab:red", markersize=8, label="S_Ti (closed form): under the bound")
    right.set(ylabel=label(result.ST_bound), title="the bound of the total Sobol' indices")
    for ax in (left, right):
        ax.set_xticks(position, names)
        ax.set_xlabel(label(result.param))
        ax.set_ylim(0, 1.35 * ax.get_ylim()[1])  # room for the legend
        ax.legend(fontsize="small", loc="upper left", markerscale=0.4)
    directory.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / "dgsm_bars.png", dpi=100)
    plt.close(fig)
    return [directory / "dgsm_bars.png"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=OUTPUT, metavar="DIR",
                        help="where the PNG figures go (default: examples/output/)")
    main(parser.parse_args().figures)
