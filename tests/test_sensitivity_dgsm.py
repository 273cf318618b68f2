"""lf.sensitivity.dgsm: SALib's statistics, the bootstrap, the Jacobian modes, progress
reports and the options' errors.  Oracles: closed-form gradients, the standard error of
a mean, a classical (index-resampling) bootstrap written here."""
from statistics import NormalDist
import sys

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

A, B = 7.0, 0.1
NAMES = ("x1", "x2", "x3")
BOUNDS = {name: (-np.pi, np.pi) for name in NAMES}
Z95 = NormalDist().inv_cdf(0.975)


def ishigami(p):
    return np.sin(p.x1) + A * np.sin(p.x2) ** 2 + B * p.x3 ** 4 * np.sin(p.x1)


def ishigami_gradient(s):
    return np.stack([np.cos(s.x1) * (1 + B * s.x3 ** 4), 2 * A * np.sin(s.x2) * np.cos(s.x2),
                     4 * B * s.x3 ** 3 * np.sin(s.x1)])


def uniform_samples(n, seed=0):
    rng = np.random.default_rng(seed)
    return xr.Dataset({name: ("sample", rng.uniform(-np.pi, np.pi, n)) for name in NAMES})


def test_vi_std_is_the_spread_of_the_squared_gradients():
    samples = uniform_samples(3000)
    result = lf.sensitivity.dgsm(ishigami, samples, num_resamples=2)
    squares = ishigami_gradient(samples) ** 2
    np.testing.assert_allclose(result.vi_std.values, squares.std(axis=1), rtol=1e-10)  # SALib: np.std, ddof 0


def test_vi_conf_is_the_standard_error_of_the_mean():
    """The bootstrap interval of a mean has half-width z σ/√N, σ the samples' spread."""
    samples = uniform_samples(20_000, seed=1)
    result = lf.sensitivity.dgsm(ishigami, samples, num_resamples=400, seed=2)
    squares = ishigami_gradient(samples) ** 2
    standard_error = Z95 * squares.std(axis=1) / np.sqrt(squares.shape[1])
    # 400 resamples estimate a spread to about 1/sqrt(2 * 400) = 3.5 %
    np.testing.assert_allclose(result.vi_conf.values, standard_error, rtol=0.15)


def test_dgsm_conf_matches_a_classical_bootstrap_of_the_ratio():
    samples = uniform_samples(4000, seed=3)
    result = lf.sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=400, seed=4)
    squares = ishigami_gradient(samples) ** 2
    y = ishigami(samples).values
    rng = np.random.default_rng(5)
    resampled = []
    for _ in range(1000):
        index = rng.integers(0, y.size, y.size)
        resampled.append(squares[:, index].mean(axis=1) * (2 * np.pi) ** 2 / (np.pi ** 2 * y[index].var()))
    classical = Z95 * np.std(resampled, axis=0, ddof=1)
    np.testing.assert_allclose(result.dgsm_conf.values, classical, rtol=0.15)
    # and not the half-width of vi scaled by a fixed variance: Var Y is resampled too
    assert not np.allclose(result.dgsm_conf.values, result.vi_conf.values * 4 / y.var(), rtol=0.02)


def test_the_seed_fixes_the_bootstrap():
    samples = uniform_samples(500)
    first, again, other = (lf.sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=20, seed=seed)
                           for seed in (7, 7, 8))
    xr.testing.assert_identical(first, again)
    assert not np.allclose(first.vi_conf.values, other.vi_conf.values)
    xr.testing.assert_identical(first.vi, other.vi)


def test_result_variables_in_salib_order_then_ours():
    result = lf.sensitivity.dgsm(ishigami, uniform_samples(200), bounds=BOUNDS, num_resamples=5)
    assert list(result.data_vars) == ["vi", "vi_std", "dgsm", "dgsm_conf", "vi_conf", "ST_bound"]
    frame = result.to_dataframe()
    assert list(frame.columns) == list(result.data_vars) and list(frame.index) == list(NAMES)
    assert list(lf.sensitivity.dgsm(ishigami, uniform_samples(200), num_resamples=5).data_vars) == [
        "vi", "vi_std", "vi_conf"]


# --- the Jacobian of each example: forward or reverse mode ---------------------------------------
def decay_samples(n=400):
    rng = np.random.default_rng(1)
    return xr.Dataset({name: ("sample", rng.uniform(0.5, 1.5, n)) for name in ("k", "c")})


T = xr.DataArray(np.linspace(0, 1, 5), dims="t", coords={"t": np.linspace(0, 1, 5)})


def decay(p):
    return p.c * np.exp(-p.k * T)


@pytest.mark.parametrize("model, samples, expected_vi", [
    (ishigami, uniform_samples(300), lambda s: (ishigami_gradient(s) ** 2).mean(axis=1)),
    (decay, decay_samples(), lambda s: np.stack([((-T * s.c * np.exp(-s.k * T)) ** 2).mean("sample").values,
                                                 (np.exp(-s.k * T) ** 2).mean("sample").values])),
], ids=["scalar-output", "output-with-dims"])
def test_every_mode_gives_the_closed_form(model, samples, expected_vi):
    bounds = {name: (0.0, 2.0) for name in samples.data_vars}
    results = {mode: lf.sensitivity.dgsm(model, samples, bounds=bounds, num_resamples=5, seed=0, mode=mode)
               for mode in ("auto", "forward", "reverse")}
    for mode, result in results.items():
        np.testing.assert_allclose(result.vi.values, expected_vi(samples), rtol=1e-12, err_msg=mode)
        xr.testing.assert_allclose(result, results["auto"], rtol=1e-12)
    if "t" in results["auto"].dims:
        assert results["auto"].vi.dims == ("param", "t")
        assert results["auto"].t.values.tolist() == T.t.values.tolist()


def test_dgsm_auto_mode_on_a_field_output_uses_forward_mode(monkeypatch):
    import labeled_func.sensitivity as sensitivity

    used = []
    for name in ("jacfwd", "jacrev"):
        original = getattr(sensitivity, name)
        monkeypatch.setattr(sensitivity, name, lambda f, _o=original, _n=name, **kw: (used.append(_n), _o(f, **kw))[1])
    lf.sensitivity.dgsm(decay, decay_samples(), num_resamples=2)                       # 2 parameters, 5 outputs
    lf.sensitivity.dgsm(lambda p: decay(p).isel(t=slice(0, 2)), decay_samples(), num_resamples=2)  # 2 and 2
    lf.sensitivity.dgsm(ishigami, uniform_samples(50), num_resamples=2)                # scalar: one VJP, no Jacobian
    assert used == ["jacfwd", "jacrev"]


# --- chunks of samples and progress ---------------------------------------------------------------
def test_chunk_size_changes_nothing_but_the_steps():
    samples = uniform_samples(10_000, seed=4)
    whole = lf.sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=30, seed=1)
    steps = []
    chunked = lf.sensitivity.dgsm(ishigami, samples, bounds=BOUNDS, num_resamples=30, seed=1, chunk_size=3000,
                                  progress=lambda done, total: steps.append((done, total)))
    xr.testing.assert_allclose(whole, chunked, rtol=1e-12)
    assert steps == [(k, 5) for k in range(1, 6)]  # 4 chunks of gradients, 1 step of resampling


def test_progress_callback_counts_every_step():
    steps = []
    lf.sensitivity.dgsm(ishigami, uniform_samples(1000), num_resamples=10,
                        progress=lambda done, total: steps.append((done, total)))
    assert steps == [(k, 11) for k in range(1, 12)]  # ten steps of gradients, one of resampling


def test_progress_without_tqdm_writes_a_line_to_stderr(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    lf.sensitivity.dgsm(ishigami, uniform_samples(1000), num_resamples=10, progress=True)
    err = capsys.readouterr().err
    assert "dgsm: 11/11 steps" in err and err.endswith("\n")


def test_progress_draws_a_tqdm_bar(capsys):
    pytest.importorskip("tqdm")
    lf.sensitivity.dgsm(ishigami, uniform_samples(1000), num_resamples=10, progress=True)
    assert "11/11" in capsys.readouterr().err


def test_no_progress_by_default(capsys):
    lf.sensitivity.dgsm(ishigami, uniform_samples(100), num_resamples=3)
    assert capsys.readouterr() == ("", "")


# --- bad options ------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, culprit", [
    ({"num_resamples": 1}, "num_resamples=1"),
    ({"num_resamples": 10.0}, "num_resamples=10.0"),
    ({"conf_level": 1.5}, "conf_level=1.5"),
    ({"conf_level": 0}, "conf_level=0"),
    ({"seed": -1}, "seed=-1"),
    ({"seed": "abc"}, "seed='abc'"),
    ({"mode": "sideways"}, "mode='sideways'"),
    ({"chunk_size": 0}, "chunk_size=0"),
    ({"progress": "yes"}, "progress='yes'"),
    ({"bounds": {"x1": (1, -1), "x2": (0, 1), "x3": (0, 1)}}, r"bounds\['x1'\]"),
    ({"bounds": BOUNDS, "problem": {"names": list(NAMES), "bounds": [[0, 1]] * 3}}, "bounds= or problem="),
])
def test_bad_options_raise_naming_the_argument(options, culprit):
    with pytest.raises(ValueError, match=culprit):
        lf.sensitivity.dgsm(ishigami, uniform_samples(20), **options)


def test_samples_of_another_type_raise():
    with pytest.raises(ValueError, match="samples must be a Dataset"):
        lf.sensitivity.dgsm(ishigami, [[0.0, 1.0, 2.0]])


def test_fewer_than_two_samples_raise_naming_the_dim():
    with pytest.raises(ValueError, match="1 sample\\(s\\) along 'sample'"):
        lf.sensitivity.dgsm(ishigami, uniform_samples(1))


def test_dgsm_variables_say_what_they_are_and_their_units():
    """vi is in (output units / parameter units)^2, one per parameter (a coordinate along
    param); the indices and the bound are dimensionless; nothing is inherited from the output."""
    rng = np.random.default_rng(0)
    samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 400), {"units": "K"}),
                          "b": ("sample", rng.uniform(0, 1, 400), {"units": "m"})})
    result = lf.sensitivity.dgsm(lambda p: (3 * p.a + p.b ** 2).assign_attrs(units="W"), samples,
                                 bounds={"a": (0, 1), "b": (0, 1)})
    assert result.vi_units.values.tolist() == ["W2 K-2", "W2 m-2"]
    for name in ("dgsm", "dgsm_conf", "ST_bound"):
        assert result[name].attrs["units"] == "1"
    assert "units" not in result.vi.attrs and result.vi.attrs["long_name"].startswith("mean squared derivative")
    bare = xr.Dataset({name: ("sample", samples[name].values) for name in samples.data_vars})
    plain = lf.sensitivity.dgsm(lambda p: 3 * p.a, bare)
    assert "vi_units" not in plain.coords


def _uniform_ab(n=400, seed=3):
    rng = np.random.default_rng(seed)
    return xr.Dataset({"a": ("sample", rng.uniform(0, 1, n)), "b": ("sample", rng.uniform(0, 1, n))})


AB_BOUNDS = {"a": (0.0, 1.0), "b": (0.0, 1.0)}


@pytest.mark.parametrize("model, what", [
    (lambda p: xr.where(p.b > 0.9, np.nan, p.a + p.b), "output"),  # undefined where b > 0.9
    (lambda p: np.sqrt(p.a - 0.5) + p.b, "output"),               # NaN where a < 0.5
    (lambda p: np.cbrt(p.a - 0.5) + p.b, "derivative"),            # its slope at a = 0.5 is infinite
])
def test_a_model_undefined_in_some_samples_is_refused_not_averaged_over_the_others(model, what):
    """As sobol and morris refuse NaN outputs: the mean over the other samples would be the
    measure of another model (vi was 0.897 where the defined samples give 1.0), silently."""
    samples = _uniform_ab()
    if what == "derivative":  # a sample exactly at the kink: a finite output, an infinite derivative
        samples["a"][7] = 0.5
    bad = int((~np.isfinite(model(samples))).sum()) if what == "output" else 1
    with pytest.raises(ValueError, match=rf"dgsm: the model's {what} is not finite .* in {bad} of the 400 samples"):
        lf.sensitivity.dgsm(model, samples, bounds=AB_BOUNDS)


def test_a_model_undefined_in_some_dask_samples_gives_nan_measures():
    pytest.importorskip("dask.array")
    samples = _uniform_ab()
    result = lf.sensitivity.dgsm(lambda p: xr.where(p.b > 0.9, np.nan, p.a + p.b), samples.chunk(sample=100),
                                 bounds=AB_BOUNDS)
    with np.errstate(invalid="ignore"):
        computed = result.compute()
    assert np.isnan(computed.vi.values).all() and np.isnan(computed.dgsm.values).all()


def test_a_field_cell_masked_in_every_sample_gives_nan_there_and_the_measures_elsewhere():
    samples = _uniform_ab()

    def field(p):
        return xr.DataArray([1.0, np.nan], dims="cell") * (p.a + p.b ** 2)

    result = lf.sensitivity.dgsm(field, samples, bounds=AB_BOUNDS)
    assert np.isnan(result.vi.sel(cell=1).values).all()
    expected = [1.0, float((4 * samples.b ** 2).mean())]  # E[(df/da)^2], E[(df/db)^2] in the open cell
    np.testing.assert_allclose(result.vi.sel(cell=0).values, expected, rtol=1e-12)
