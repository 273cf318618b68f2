"""lf.sensitivity against closed forms and published values."""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

A, B = 7.0, 0.1


def ishigami(p):
    return np.sin(p.x1) + A * np.sin(p.x2) ** 2 + B * p.x3 ** 4 * np.sin(p.x1)


def ishigami_gradient(x1, x2, x3):
    return (np.cos(x1) * (1 + B * x3 ** 4), 2 * A * np.sin(x2) * np.cos(x2), 4 * B * x3 ** 3 * np.sin(x1))


def uniform_samples(names, n, low, high, seed=0):
    rng = np.random.default_rng(seed)
    return xr.Dataset({name: ("sample", rng.uniform(low, high, n)) for name in names})


def test_ishigami_vi_is_the_mean_squared_closed_form_gradient():
    samples = uniform_samples(["x1", "x2", "x3"], 4096, -np.pi, np.pi)
    result = lf.sensitivity.dgsm(ishigami, samples, num_resamples=10)
    exact = [np.mean(g ** 2) for g in ishigami_gradient(samples.x1.values, samples.x2.values, samples.x3.values)]
    assert result.vi.dims == ("param",)
    assert result.param.values.tolist() == ["x1", "x2", "x3"]
    np.testing.assert_allclose(result.vi.values, exact, rtol=1e-10)


def test_ishigami_dgsm_matches_published_values():
    # SALib's normalisation: vi (b - a)^2 / (pi^2 Var Y); published [2.2304, 7.0786, 3.1745]
    samples = uniform_samples(["x1", "x2", "x3"], 2 ** 14, -np.pi, np.pi, seed=1)
    bounds = {name: (-np.pi, np.pi) for name in ("x1", "x2", "x3")}
    result = lf.sensitivity.dgsm(ishigami, samples, bounds=bounds, num_resamples=20)
    np.testing.assert_allclose(result.dgsm.values, [2.2304, 7.0786, 3.1745], rtol=0.05)
    assert (result.vi_conf > 0).all()


def test_sobol_g_function_vi():
    a = np.array([0, 1, 4.5, 9, 99, 99, 99, 99])
    names = [f"x{i}" for i in range(len(a))]

    def g_function(p):
        factors = [(np.abs(4 * p[name] - 2) + a_i) / (1 + a_i) for name, a_i in zip(names, a)]
        out = factors[0]
        for factor in factors[1:]:
            out = out * factor
        return out

    samples = uniform_samples(names, 2 ** 16, 0, 1, seed=2)
    result = lf.sensitivity.dgsm(g_function, samples, num_resamples=2)
    others = 1 + 1 / (3 * (1 + a) ** 2)
    expected = [16 / (1 + a_i) ** 2 * np.prod(np.delete(others, i)) for i, a_i in enumerate(a)]
    np.testing.assert_allclose(result.vi.values, expected, rtol=0.02)


def test_dgsm_with_output_dims_keeps_them_after_param():
    t = xr.DataArray(np.linspace(0, 1, 5), dims="t")
    samples = uniform_samples(["k", "c"], 512, 0.5, 1.5)
    result = lf.sensitivity.dgsm(lambda p: p.c * np.exp(-p.k * t), samples, num_resamples=5)
    assert result.vi.dims == ("param", "t")
    k, c = samples.k, samples.c
    expected_k = ((-t * c * np.exp(-k * t)) ** 2).mean("sample")
    np.testing.assert_allclose(result.vi.sel(param="k").values, expected_k.values, rtol=1e-10)


def test_local_elasticities_of_exponential_decay():
    t = xr.DataArray(np.linspace(0, 2, 7), dims="t")
    params = xr.Dataset({"amplitude": 3.0, "rate": 0.7})
    decay = lambda p: p.amplitude * np.exp(-p.rate * t)
    elasticities = lf.sensitivity.local(decay, params)
    np.testing.assert_allclose(elasticities.amplitude.values, np.ones(7))
    np.testing.assert_allclose(elasticities.rate.values, -0.7 * t.values)
    raw = lf.sensitivity.local(decay, params, normalize=False)
    np.testing.assert_allclose(raw.rate.values, -t.values * 3.0 * np.exp(-0.7 * t.values))


def test_local_elasticities_of_a_vector_parameter_sharing_the_output_dim():
    # y_i = A_i + 0.5 A_(i-1): the elasticity is dy_i/dA_j * A_j / y_i, scaled by A_j (not A_i).
    params = xr.Dataset({"A": ("site", [1.0, 2.0, 4.0])})
    model = lambda p: p.A + 0.5 * p.A.roll(site=1)
    a = params.A.values
    y = a + 0.5 * np.roll(a, 1)
    jacobian = np.eye(3) + 0.5 * np.roll(np.eye(3), 1, axis=0)  # dy_i/dA_j by hand
    elasticities = lf.sensitivity.local(model, params)
    assert elasticities.A.dims == ("site", "site_wrt")
    np.testing.assert_allclose(elasticities.A.values, jacobian * a[None, :] / y[:, None], rtol=1e-14)


@pytest.mark.parametrize("bounds", [None, {name: (-np.pi, np.pi) for name in ("x1", "x2", "x3")}])
def test_dgsm_evaluates_the_model_once_per_batch(bounds):
    calls = []

    def model(p):
        calls.append(1)
        return ishigami(p)

    lf.sensitivity.dgsm(model, uniform_samples(["x1", "x2", "x3"], 64, -np.pi, np.pi), bounds=bounds,
                        num_resamples=2)
    assert len(calls) == 1  # one (vmapped, traced) forward pass, then its backward pass


@pytest.mark.parametrize("model, culprit", [
    (lambda p: p.a * xr.DataArray(np.ones(2), dims="param"), r"\['param'\]"),
    (lambda p: xr.Dataset({"y": p.a}), r"returned a Dataset"),
    (lambda p: p.a * xr.DataArray(np.arange(3.0), dims="time") + p.time, r"\['time'\]"),
], ids=["output-dim-param", "dataset-output", "output-dim-named-like-a-parameter"])
def test_dgsm_model_outputs_it_cannot_label_raise(model, culprit):
    rng = np.random.default_rng(0)
    samples = xr.Dataset({"a": ("sample", rng.uniform(0, 1, 50)), "time": ("sample", rng.uniform(0, 1, 50))})
    with pytest.raises(ValueError, match=culprit):
        lf.sensitivity.dgsm(model, samples, num_resamples=2)


def test_bad_inputs():
    samples = uniform_samples(["x1", "x2", "x3"], 16, -1, 1)
    with pytest.raises(ValueError, match="x4"):
        lf.sensitivity.dgsm(ishigami, samples.assign(x4=1.0))
    with pytest.raises(ValueError, match="x3"):
        lf.sensitivity.dgsm(ishigami, samples, bounds={"x1": (-1, 1), "x2": (-1, 1)})
    with pytest.raises(ValueError, match="named dims"):
        lf.sensitivity.dgsm(lambda p: np.stack([p.x1.data, p.x2.data]), samples)
