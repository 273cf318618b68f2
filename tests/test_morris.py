"""lf.sensitivity.morris against closed forms: a linear model (every elementary effect is
its coefficient), kinks and squares on the grid, the G-function's ranking; a field output
element by element; chunked against one call; the exact derivatives; SALib itself (on its
own samples) where it is installed."""
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from stepping_model import STEPPING_BOUNDS, counted, stepping, vmap_call_sizes
from labeled_func.morris import trajectory_design


def test_linear_model_every_effect_is_its_coefficient():
    a = {"x": 2.0, "y": -3.0, "z": 0.5, "w": 0.0}
    result = lf.sensitivity.morris(lambda p: sum(c * p[k] for k, c in a.items()), dict.fromkeys(a, (0, 1)), 30,
                                   seed=0, gradients=True)
    coefficients = np.array(list(a.values()))
    np.testing.assert_allclose(result.mu.values, coefficients, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.mu_star.values, np.abs(coefficients), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.sigma.values, 0, atol=1e-12)
    np.testing.assert_allclose(result.mu_star_conf.values, 0, atol=1e-12)
    # the derivatives (times high - low = 1) are the coefficients too
    np.testing.assert_allclose(result.mu_grad.values, coefficients, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.sigma_grad.values, 0, atol=1e-12)
    assert result.param.values.tolist() == list(a)
    assert result.attrs["model_evaluations"] == 30 * 5 and result.attrs["delta"] == pytest.approx(2 / 3)


def test_effects_are_per_unit_cube_step():
    """On [low, high] an elementary effect of a x is a (high - low), as SALib's."""
    result = lf.sensitivity.morris(lambda p: 2 * p.x + p.y, {"x": (-1, 3), "y": (10, 11)}, 10, seed=1,
                                   gradients=True)
    np.testing.assert_allclose(result.mu.values, [8.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(result.mu_grad.values, [8.0, 1.0], rtol=1e-12)


def test_kink_and_square_closed_forms():
    """levels=4 on [0, 1]: every step joins 0 and 2/3, or 1/3 and 1.  |x - 1/2| then changes by
    -1/3 or +1/3 (effects -1/2, +1/2: mu_star = 1/2), while its derivative at the first point is
    always -1 or +1 (mu_star_grad = 1): the effects average the slope across the kink.  x² has
    effects 2/3 or 4/3 (2 x_low + delta) and levels=2 (delta = 1) gives 1 for all."""
    result = lf.sensitivity.morris(lambda p: np.abs(p.x - 0.5) + p.y ** 2, {"x": (0, 1), "y": (0, 1)}, 200,
                                   seed=2, gradients=True)
    np.testing.assert_allclose(result.mu_star.sel(param="x").item(), 0.5, rtol=1e-12)
    np.testing.assert_allclose(result.mu_star_grad.sel(param="x").item(), 1.0, rtol=1e-12)
    unit = trajectory_design(200, 2, 4, 2)
    low = np.minimum(unit[:, :-1], unit[:, 1:])
    moved_y = np.abs(np.diff(unit[..., 1], axis=1)).argmax(axis=1)
    expected = 2 * low[np.arange(200), moved_y, 1] + 2 / 3
    np.testing.assert_allclose(result.mu_star.sel(param="y").item(), expected.mean(), rtol=1e-12)
    assert set(np.round(expected, 12)) == {round(2 / 3, 12), round(4 / 3, 12)}
    assert abs(result.mu_star.sel(param="y").item() - 1.0) < 0.1     # E = 1
    two = lf.sensitivity.morris(lambda p: p.y ** 2, {"y": (0, 1)}, 5, levels=2, seed=0)
    np.testing.assert_allclose(two.mu_star.values, [1.0], rtol=1e-12)
    np.testing.assert_allclose(two.sigma.values, [0.0], atol=1e-12)


def test_g_function_ranking():
    coefficients = np.array([0.0, 1.0, 4.5, 9.0, 99.0])
    names = [f"x{i}" for i in range(len(coefficients))]

    def g(p):
        out = 1.0
        for name, c in zip(names, coefficients):
            out = out * (np.abs(4 * p[name] - 2) + c) / (1 + c)
        return out

    result = lf.sensitivity.morris(g, dict.fromkeys(names, (0, 1)), 100, seed=3)
    assert result.mu_star.values.argsort().tolist() == [4, 3, 2, 1, 0]   # important = small coefficient
    assert result.mu_star.values[4] < 0.05 * result.mu_star.values[0]


def test_design_is_on_the_grid_one_at_a_time():
    unit = trajectory_design(50, 4, 6, 0)
    delta = 6 / 10
    assert unit.shape == (50, 5, 4)
    np.testing.assert_allclose(np.round(unit * 5) / 5, unit, atol=1e-12)   # levels 0, 1/5, ..., 1
    steps = np.diff(unit, axis=1)
    assert ((np.abs(steps) > 1e-12).sum(axis=-1) == 1).all()               # one input per step
    np.testing.assert_allclose(np.abs(steps).sum(axis=-1), delta)
    assert ((np.abs(steps) > 1e-12).sum(axis=1) == 1).all()                # each input once


def test_field_output_element_by_element():
    weights = xr.DataArray([[1.0, 0.0], [1.0, 1.0], [0.2, 3.0]], dims=("site", "w"),
                           coords={"site": ["a", "b", "c"], "w": ["u", "v"]})
    bounds = {"u": (0, 1), "v": (0, 2)}

    def model(p):
        return (weights.sel(w="u", drop=True) * p.u + weights.sel(w="v", drop=True) * p.v ** 2).assign_attrs(
            units="W")

    result = lf.sensitivity.morris(model, bounds, 40, seed=4, gradients=True)
    assert result.mu_star.dims == ("param", "site") and result.mu_star_grad_conf.dims == ("param", "site")
    assert result.site.values.tolist() == ["a", "b", "c"] and result.mu.attrs["units"] == "W"
    for site in ["a", "b", "c"]:
        w = weights.sel(site=site)
        alone = lf.sensitivity.morris(lambda p: float(w[0]) * p.u + float(w[1]) * p.v ** 2, bounds, 40, seed=4,
                                      gradients=True)
        for key in alone.data_vars:
            np.testing.assert_allclose(result[key].sel(site=site).values, alone[key].values, rtol=1e-10,
                                       atol=1e-12)


def test_chunk_size_equals_one_call(monkeypatch):
    def model(p):
        return np.sin(p.x1) + 7 * np.sin(p.x2) ** 2 + 0.1 * p.x3 ** 4 * np.sin(p.x1)

    bounds = {name: (-np.pi, np.pi) for name in ("x1", "x2", "x3")}
    whole = lf.sensitivity.morris(model, bounds, 25, seed=5, gradients=True)
    sizes = vmap_call_sizes(monkeypatch, "labeled_func.morris", "labeled_func.model_blocks")  # the model's blocks
    chunked = lf.sensitivity.morris(model, bounds, 25, seed=5, gradients=True, chunk_size=30, jit=False)
    assert sizes == [28, 28, 28, 16] + [7, 7, 7, 4]   # 7 trajectories of 4 rows, then the gradients
    for key in whole.data_vars:
        np.testing.assert_allclose(chunked[key].values, whole[key].values, rtol=0, atol=1e-12)


def test_seed_reproduces():
    bounds = {"a": (0, 1), "b": (0, 1)}
    one = lf.sensitivity.morris(lambda p: p.a * p.b, bounds, 10, seed=9)
    two = lf.sensitivity.morris(lambda p: p.a * p.b, bounds, 10, seed=9)
    xr.testing.assert_identical(one, two)


def test_bounded_distributions_and_refusals():
    problem = {"names": ["a", "b"], "bounds": [[1.0, 100.0], [0.0, 1.0, 0.5]], "dists": ["logunif", "triang"]}
    result = lf.sensitivity.morris(lambda p: np.log(p.a) + p.b, problem, 20, seed=0, gradients=True)
    # log a with a = 1 * 100**u is u log 100: every effect (per unit of u) is log 100
    np.testing.assert_allclose(result.mu.sel(param="a").item(), np.log(100), rtol=1e-12)
    np.testing.assert_allclose(result.sigma.sel(param="a").item(), 0, atol=1e-12)
    # b enters linearly: the derivative times its step over delta is its elementary effect
    for key in ("mu", "mu_star", "sigma", "mu_star_conf"):
        grad = key.replace("_conf", "") + "_grad" + ("_conf" if key.endswith("_conf") else "")
        np.testing.assert_allclose(result[grad].sel(param="b").item(), result[key].sel(param="b").item(),
                                   rtol=1e-12, atol=1e-12)
    assert np.isfinite(result.mu_grad.values).all()     # a density of 0 at the ends of b: no inf
    with pytest.raises(ValueError, match=r"\['b'\] \(norm\) are unbounded"):
        lf.sensitivity.morris(lambda p: p.a + p.b, {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]],
                                                    "dists": ["unif", "norm"]}, 10)


@pytest.mark.parametrize("options, match", [
    ({"trajectories": 1}, "trajectories=1 must be an int >= 2"),
    ({"trajectories": 2.5}, "trajectories=2.5"),
    ({"levels": 3}, "levels=3 must be an even int"),
    ({"levels": 0}, "levels=0"),
    ({"seed": -1}, "seed=-1"),
    ({"num_resamples": 1}, "num_resamples=1"),
    ({"conf_level": 1.5}, "conf_level=1.5"),
    ({"dim": "param"}, "dim='param'"),
    ({"chunk_size": 0}, "chunk_size=0"),
    ({"gradients": 1}, "gradients=1 must be True or False"),
    ({"jit": "yes"}, "sensitivity.morris: jit='yes' must be True, False or None"),
    ({"progress": 1.5}, "sensitivity.morris: progress=1.5 must be None, a bool, or a callable"),
])
def test_bad_options(options, match):
    kwargs = {"trajectories": 4, **options}
    trajectories = kwargs.pop("trajectories")
    with pytest.raises(ValueError, match=match):
        lf.sensitivity.morris(lambda p: p.a, {"a": (0, 1)}, trajectories, **kwargs)


def test_bad_problems_and_models():
    with pytest.raises(ValueError, match=r"sensitivity.morris: the bounds of 'b' \(unif\) are \(1, 0\)"):
        lf.sensitivity.morris(lambda p: p.a + p.b, {"a": (0, 1), "b": (1, 0)}, 4)
    with pytest.raises(ValueError, match="sensitivity.morris: model must be a function"):
        lf.sensitivity.morris({"a": (0, 1)}, lambda p: p.a, 4)
    with pytest.raises(ValueError, match="sensitivity.morris: the model returned a Dataset"):
        lf.sensitivity.morris(lambda p: p, {"a": (0, 1)}, 4)
    with pytest.raises(ValueError, match="sensitivity.morris: the model's output has dims"):
        lf.sensitivity.morris(lambda p: p.a * xr.DataArray([1.0, 2.0], dims="param"), {"a": (0, 1)}, 4)


def test_salib_agrees_on_its_own_samples():
    salib_sample = pytest.importorskip("SALib.sample.morris")
    salib_analyze = pytest.importorskip("SALib.analyze.morris")
    problem = {"names": ["x1", "x2", "x3", "x4"], "num_vars": 4, "dists": ["unif", "unif", "triang", "logunif"],
               "bounds": [[-np.pi, np.pi], [0.0, 1.0], [-np.pi, np.pi, 0.3], [0.5, 2.0]]}

    def model(p):
        return np.sin(p.x1) + 7 * np.sin(p.x2) ** 2 + 0.1 * p.x3 ** 4 * np.sin(p.x1) + np.abs(p.x4 - 1)

    for levels, r in ((4, 50), (6, 31)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            X = salib_sample.sample(dict(problem), r, num_levels=levels, seed=7)
        Y = np.sin(X[:, 0]) + 7 * np.sin(X[:, 1]) ** 2 + 0.1 * X[:, 2] ** 4 * np.sin(X[:, 0]) + np.abs(X[:, 3] - 1)
        theirs = salib_analyze.analyze(dict(problem), X, Y, num_resamples=100, num_levels=levels, seed=7)
        ours = lf.sensitivity.morris(model, problem, r, levels=levels, num_resamples=100, seed=7)
        for key in ours.data_vars:   # the same design, effects and bootstrap indices
            np.testing.assert_allclose(ours[key].values, theirs[key], rtol=0, atol=1e-10)


def test_plot_indices_draws_mu_star():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    result = lf.sensitivity.morris(lambda p: 3 * p.a + p.b ** 2, {"a": (0, 1), "b": (0, 1)}, 10, seed=0,
                                   gradients=True)
    ax = lf.sensitivity.plot_indices(result)
    assert len(ax.patches) == 4 and [t.get_text() for t in ax.get_legend().get_texts()] == ["mu_star",
                                                                                            "mu_star_grad"]
    assert sum(type(c).__name__ == "ErrorbarContainer" for c in ax.containers) == 2   # mu_star_conf, mu_star_grad_conf
    ax = lf.sensitivity.plot_indices(result.drop_vars([k for k in result.data_vars if "grad" in k]))
    assert len(ax.patches) == 2


def test_non_finite_outputs_are_refused_with_their_rows():
    def model(p):
        return np.sqrt(p.a - 0.5) + p.b   # NaN on the grid's levels 0 and 1/3 of a

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError) as caught:
            lf.sensitivity.morris(model, {"a": (0, 1), "b": (0, 1)}, 10, seed=0)
    design = trajectory_design(10, 2, 4, 0).reshape(-1, 2)   # the oracle: the rows' a
    bad = np.flatnonzero(design[:, 0] < 0.5)
    message = str(caught.value)
    assert f"sensitivity.morris: the model's output is not finite (NaN or infinite) in {len(bad)} of its 30 rows" \
        in message
    assert f"{bad[0]}: a={design[bad[0], 0]:.6g}, b={design[bad[0], 1]:.6g}" in message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError, match=r"in \d+ of the 9 rows 0 to 8 of the 30 \(one block"):
            lf.sensitivity.morris(model, {"a": (0, 1), "b": (0, 1)}, 10, seed=0, chunk_size=9)


# --- blocks replay one lf.jit program; progress ------------------------------------------------------


def test_blocks_replay_one_program_and_give_the_unjitted_results():
    model, plain_model, steps = counted(stepping), counted(stepping), []
    jitted = lf.sensitivity.morris(model, STEPPING_BOUNDS, 50, seed=1, chunk_size=7 * 4, gradients=True,
                                   progress=lambda done, total: steps.append((done, total)))
    assert model.calls == 1 + 8            # 8 blocks of 7 trajectories, the last padded: one trace; the gradients
                                           # (un-jitted): once per block
    assert steps == [(k, 16) for k in range(1, 17)]   # 8 blocks of the model, 8 of its gradients
    plain = lf.sensitivity.morris(plain_model, STEPPING_BOUNDS, 50, seed=1, chunk_size=7 * 4, gradients=True,
                                  jit=False)
    assert plain_model.calls == 8 + 8
    xr.testing.assert_identical(jitted, plain)


def test_a_jitted_model_and_progress_without_chunk_size():
    model, steps = counted(stepping), []
    fast = lf.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = lf.sensitivity.morris(fast, STEPPING_BOUNDS, 20, seed=0, progress=lambda d, t: steps.append((d, t)))
        second = lf.sensitivity.morris(fast, STEPPING_BOUNDS, 20, seed=3, progress=lambda d, t: None)
    assert model.calls == 1 and steps == [(k, 10) for k in range(1, 11)]   # ten blocks of 2 trajectories
    xr.testing.assert_identical(first, lf.sensitivity.morris(stepping, STEPPING_BOUNDS, 20, seed=0))
    xr.testing.assert_identical(second, lf.sensitivity.morris(stepping, STEPPING_BOUNDS, 20, seed=3))

