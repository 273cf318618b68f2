"""lf.sensitivity against closed forms and published values."""
import tracemalloc

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


# --- local: forward or reverse mode -------------------------------------------------------------
def central_differences(model, params, step=1e-6):
    """{name: ∂y/∂p} by central differences, one parameter element at a time (dims: the
    output's, then the parameter's renamed with `_wrt` where they clash)."""
    out = {}
    for name, var in params.data_vars.items():
        columns = []
        for k in range(var.size):
            shift = np.zeros(var.size)
            shift[k] = step * max(1.0, abs(var.values.ravel()[k]))
            up = params.assign({name: var + shift.reshape(var.shape)})
            down = params.assign({name: var - shift.reshape(var.shape)})
            columns.append(((model(up) - model(down)) / (2 * shift[k])).values)
        out[name] = np.stack(columns, axis=-1).reshape(np.shape(columns[0]) + var.shape)
    return out


def field_model(lat, lon):
    phi, lam = np.deg2rad(lat), np.deg2rad(lon)

    def model(p):
        return (p.t0 + p.amp * np.cos(phi) ** 2 + p.wave * np.sin(2 * lam) * np.cos(phi)
                + p.scale * np.exp(p.decay * np.sin(phi)))

    def derivatives(p):  # ∂y/∂p written out by hand
        ones = xr.ones_like(phi * lam)
        return {"t0": ones, "amp": np.cos(phi) ** 2 * ones, "wave": np.sin(2 * lam) * np.cos(phi),
                "scale": np.exp(p.decay * np.sin(phi)) * ones,
                "decay": p.scale * np.sin(phi) * np.exp(p.decay * np.sin(phi)) * ones}

    return model, derivatives


FIELD_PARAMS = xr.Dataset({"t0": 280.0, "amp": 30.0, "wave": 5.0, "decay": 0.3, "scale": 2.0})


def grid(n_lat, n_lon):
    lat = np.linspace(-90 + 90 / n_lat, 90 - 90 / n_lat, n_lat)
    lon = np.linspace(180 / n_lon, 360 - 180 / n_lon, n_lon)
    return xr.DataArray(lat, dims="lat", coords={"lat": lat}), xr.DataArray(lon, dims="lon", coords={"lon": lon})


@pytest.mark.parametrize("normalize", [False, True])
def test_local_forward_reverse_and_finite_differences_agree(normalize):
    lat, lon = grid(6, 8)
    model, _ = field_model(lat, lon)
    # a vector parameter on the output's own dim as well: ∂y_i/∂w_j, dims (lat, lon, lat_wrt)
    params = FIELD_PARAMS.assign(bump=("lat", np.linspace(0.5, 1.5, 6)))
    vector_model = lambda p: model(p) + p.bump ** 2 * np.cos(np.deg2rad(lon))
    results = {mode: lf.sensitivity.local(vector_model, params, mode=mode, normalize=normalize)
               for mode in ("forward", "reverse", "auto")}
    xr.testing.assert_allclose(results["forward"], results["reverse"], rtol=1e-12, atol=1e-14)
    xr.testing.assert_identical(results["auto"], results["forward"])  # 6·8 outputs > 11 parameter elements
    assert results["forward"].bump.dims == ("lat", "lon", "lat_wrt")
    differences = central_differences(vector_model, params)
    output = vector_model(params).values
    for name, expected in differences.items():
        if normalize:
            scale = params[name].values.reshape((1,) * output.ndim + params[name].shape)
            expected = expected * scale / output.reshape(output.shape + (1,) * params[name].ndim)
        np.testing.assert_allclose(results["forward"][name].values, expected, rtol=1e-6, atol=1e-9)


def test_local_auto_mode_follows_the_sizes(monkeypatch):
    import labeled_func.sensitivity as sensitivity

    used = []
    for name in ("jacfwd", "jacrev"):
        original = getattr(sensitivity, name)
        monkeypatch.setattr(sensitivity, name, lambda f, _o=original, _n=name: (used.append(_n), _o(f))[1])
    lat, lon = grid(2, 2)
    model, _ = field_model(lat, lon)
    lf.sensitivity.local(model, FIELD_PARAMS)                                  # 5 parameters, 4 outputs
    lf.sensitivity.local(lambda p: model(p).isel(lat=0), FIELD_PARAMS)         # 5 parameters, 2 outputs
    lat, lon = grid(2, 3)
    model, _ = field_model(lat, lon)
    lf.sensitivity.local(model, FIELD_PARAMS)                                  # 5 parameters, 6 outputs
    assert used == ["jacrev", "jacrev", "jacfwd"]


def peak_memory(func):
    """(func(), the peak of the memory NumPy and Python allocated while it ran)."""
    tracemalloc.start()
    try:
        return func(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


MEMORY_LIMIT = 64 * 2 ** 20


def test_local_on_a_one_degree_global_grid_runs_in_linear_memory():
    """180 x 360 = 64,800 outputs and 5 parameters: reverse mode would pull 64,800 rows (a
    64,800² basis, 34 GB); forward mode pushes 5 tangents through the model."""
    lat, lon = grid(180, 360)
    model, derivatives = field_model(lat, lon)
    jacobian, peak = peak_memory(lambda: lf.sensitivity.local(model, FIELD_PARAMS, normalize=False))
    assert peak < MEMORY_LIMIT, f"peak {peak / 2 ** 20:.0f} MiB: more than linear in the 64,800 outputs"
    expected = derivatives(FIELD_PARAMS)
    for name in FIELD_PARAMS.data_vars:
        assert jacobian[name].dims == ("lat", "lon")
        np.testing.assert_allclose(jacobian[name].transpose("lat", "lon").values,
                                   expected[name].transpose("lat", "lon").values, rtol=1e-13, atol=1e-15)
    elasticity = lf.sensitivity.local(model, FIELD_PARAMS)
    np.testing.assert_allclose(elasticity.amp.values, (30.0 * expected["amp"] / model(FIELD_PARAMS)).values,
                               rtol=1e-13)


def test_the_memory_limit_catches_reverse_mode_on_a_small_grid():
    """The check above can fail: reverse mode's memory grows with the square of the
    outputs, and 40 x 80 = 3,200 of them already pass the limit (about 160 MiB)."""
    lat, lon = grid(40, 80)
    model, derivatives = field_model(lat, lon)
    jacobian, peak = peak_memory(lambda: lf.sensitivity.local(model, FIELD_PARAMS, normalize=False, mode="reverse"))
    assert peak > MEMORY_LIMIT
    np.testing.assert_allclose(jacobian.decay.values, derivatives(FIELD_PARAMS)["decay"].values, rtol=1e-13)


@pytest.mark.parametrize("mode", ["sideways", None, "Forward"])
def test_local_mode_must_be_one_of_three(mode):
    with pytest.raises(ValueError, match=r"mode=.*'auto', 'forward', 'reverse'"):
        lf.sensitivity.local(lambda p: p.a * 2, xr.Dataset({"a": 1.0}), mode=mode)


def test_local_model_returning_a_dataset_raises():
    with pytest.raises(ValueError, match="one DataArray"):
        lf.sensitivity.local(lambda p: xr.Dataset({"y": p.a}), xr.Dataset({"a": 1.0}))


def test_elasticities_are_dimensionless_and_say_what_they_are():
    t = xr.DataArray([0.0, 1.0, 2.0], dims="t")
    params = xr.Dataset({"amplitude": xr.DataArray(2.0, attrs={"units": "K"}),
                         "rate": xr.DataArray(0.5, attrs={"units": "s-1"})})

    def model(p):
        return (p.amplitude * np.exp(-p.rate * t)).rename("temperature").assign_attrs(units="K")

    elasticities = lf.sensitivity.local(model, params)
    for name in ("amplitude", "rate"):
        assert elasticities[name].attrs == {"units": "1",
                                            "long_name": f"elasticity of temperature with respect to {name}"}
    np.testing.assert_allclose(elasticities.rate.values, -0.5 * t.values)  # d log y / d log rate = -rate t
    derivatives = lf.sensitivity.local(model, params, normalize=False)
    # the output's "K" may be amplitude's, passed on by xarray: no evidence, no units (units.py)
    assert "units" not in derivatives.rate.attrs
    in_millikelvin = lf.sensitivity.local(lambda p: (model(p) * 1000.0).assign_attrs(units="mK"), params,
                                          normalize=False)
    assert in_millikelvin.rate.attrs["units"] == "mK s"  # mK per s-1
