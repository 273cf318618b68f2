"""Derivatives of ``lf.grad`` / ``jacfwd`` / ``jacrev`` / ``hessian`` / ``jvp`` / ``vjp``
against closed forms worked out by hand (and checked once against central finite
differences in NumPy, outside this file).

Models: the Ishigami function (gradient, per-sample gradients, Hessian), the
Lorenz-96 tendency (Jacobian), an explicit heat-equation solver differentiated with
respect to the diffusivity through 1000 steps, and the Dataset input/output nesting
of Jacobians.
"""

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

# --- Ishigami: f = sin x1 + A sin^2 x2 + B x3^4 sin x1 ------------------------------

A, B = 7.0, 0.1
PARAMS = ["x1", "x2", "x3"]
POINT = {"x1": 0.3, "x2": -1.1, "x3": 2.2}


def ishigami(params):
    """The Ishigami function of one example: a Dataset of 0-d variables x1, x2, x3."""
    return np.sin(params.x1) + A * np.sin(params.x2) ** 2 + B * params.x3**4 * np.sin(params.x1)


def ishigami_of_vector(p):
    """Ishigami of one DataArray ``p`` with dim "param" labelled x1, x2, x3."""
    return ishigami(xr.Dataset({name: p.sel(param=name, drop=True) for name in PARAMS}))


def ishigami_gradient(x1, x2, x3):
    return {
        "x1": np.cos(x1) * (1 + B * x3**4),
        "x2": 2 * A * np.sin(x2) * np.cos(x2),
        "x3": 4 * B * x3**3 * np.sin(x1),
    }


def ishigami_hessian(x1, x2, x3):
    cross = 4 * B * x3**3 * np.cos(x1)
    return np.array([
        [-np.sin(x1) * (1 + B * x3**4), 0.0, cross],
        [0.0, 2 * A * np.cos(2 * x2), 0.0],
        [cross, 0.0, 12 * B * x3**2 * np.sin(x1)],
    ])


def test_ishigami_gradient_is_a_dataset_of_the_same_variables():
    params = xr.Dataset({name: xr.DataArray(value) for name, value in POINT.items()})
    gradient = lf.grad(ishigami)(params)
    assert isinstance(gradient, xr.Dataset)
    assert sorted(gradient.data_vars) == PARAMS
    expected = ishigami_gradient(**POINT)
    for name in PARAMS:
        assert gradient[name].dims == ()
        np.testing.assert_allclose(float(gradient[name]), expected[name], rtol=1e-13, atol=1e-14)


def test_ishigami_per_sample_gradients_over_8192_samples():
    rng = np.random.default_rng(42)
    n = 8192
    values = {name: rng.uniform(-np.pi, np.pi, n) for name in PARAMS}
    samples = xr.Dataset(
        {name: ("sample", v) for name, v in values.items()},
        coords={"sample": np.arange(n)},
    )
    gradients = lf.vmap(lf.grad(ishigami), dim="sample")(samples)
    assert isinstance(gradients, xr.Dataset)
    assert sorted(gradients.data_vars) == PARAMS
    np.testing.assert_array_equal(gradients["sample"].values, np.arange(n))
    expected = ishigami_gradient(**values)
    for name in PARAMS:
        assert gradients[name].dims == ("sample",)
        np.testing.assert_allclose(gradients[name].values, expected[name], rtol=1e-12, atol=1e-12)


def test_ishigami_hessian_has_param_and_param_wrt_dims():
    p = xr.DataArray([POINT[n] for n in PARAMS], dims="param", coords={"param": PARAMS})
    hessian = lf.hessian(ishigami_of_vector)(p)
    assert isinstance(hessian, xr.DataArray)
    assert hessian.dims == ("param", "param_wrt")
    assert list(hessian["param"].values) == PARAMS
    assert list(hessian["param_wrt"].values) == PARAMS
    np.testing.assert_allclose(hessian.values, hessian.values.T, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(hessian.values, ishigami_hessian(**POINT), rtol=1e-12, atol=1e-13)


# --- Lorenz-96: dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F ------------------------

SITES = 40
FORCING = 8.0


def lorenz96(x):
    """The cyclic Lorenz-96 tendency of a state with dim "site"."""
    return (x.roll(site=-1) - x.roll(site=2)) * x.roll(site=1) - x + FORCING


def lorenz96_jacobian(x):
    """J[i, j] = d tendency_i / d x_j, entry by entry."""
    m = x.size
    jac = np.zeros((m, m))
    for i in range(m):
        jac[i, (i + 1) % m] += x[(i - 1) % m]
        jac[i, (i - 2) % m] -= x[(i - 1) % m]
        jac[i, (i - 1) % m] += x[(i + 1) % m] - x[(i - 2) % m]
        jac[i, i] -= 1.0
    return jac


@pytest.fixture(scope="module")
def lorenz_state():
    rng = np.random.default_rng(96)
    values = FORCING + rng.normal(size=SITES)
    return xr.DataArray(values, dims="site", coords={"site": np.arange(SITES)})


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_lorenz96_jacobian(transform, lorenz_state):
    jac = transform(lorenz96)(lorenz_state)
    assert isinstance(jac, xr.DataArray)
    assert jac.dims == ("site", "site_wrt")
    np.testing.assert_array_equal(jac["site"].values, np.arange(SITES))
    np.testing.assert_array_equal(jac["site_wrt"].values, np.arange(SITES))
    np.testing.assert_allclose(jac.values, lorenz96_jacobian(lorenz_state.values), rtol=1e-14, atol=1e-14)


def test_lorenz96_jacfwd_equals_jacrev(lorenz_state):
    forward = lf.jacfwd(lorenz96)(lorenz_state)
    reverse = lf.jacrev(lorenz96)(lorenz_state)
    xr.testing.assert_allclose(forward, reverse, rtol=1e-14, atol=1e-14)


# --- Explicit heat equation u_t = kappa u_xx on [0, 1], u = 0 at both ends ----------
# sin(pi x) is an eigenvector of the discrete Laplacian with eigenvalue -LAMBDA, so
# u^n = g^n sin(pi x) with g = 1 - kappa dt LAMBDA, and du^n/dkappa = -n g^(n-1) dt LAMBDA sin(pi x).

INTERIOR = 50
DX = 1.0 / (INTERIOR + 1)
X = np.arange(1, INTERIOR + 1) * DX
KAPPA = 1.0
DT = 0.4 * DX**2 / KAPPA  # r = kappa dt / dx^2 = 0.4 < 0.5: stable
STEPS = 1000
LAMBDA = 4.0 / DX**2 * np.sin(np.pi * DX / 2) ** 2


def heat_solve(kappa):
    """The state after STEPS explicit steps from sin(pi x), with coords on "x".

    The loop runs without an index coordinate (alignment on every step would only
    cost time); the coordinate is attached at the end.
    """
    u = xr.DataArray(np.sin(np.pi * X), dims="x")
    rate = kappa * (DT / DX**2)
    for _ in range(STEPS):
        padded = u.pad(x=1, constant_values=0.0)
        laplacian = padded.isel(x=slice(2, None)) + padded.isel(x=slice(None, -2)) - 2 * u
        u = u + rate * laplacian
    return u.assign_coords(x=X)


def heat_derivative():
    growth = 1 - KAPPA * DT * LAMBDA
    return -STEPS * growth ** (STEPS - 1) * DT * LAMBDA * np.sin(np.pi * X)


def assert_relative(actual, expected, rtol=1e-9):
    actual = np.asarray(actual, dtype=float)
    scale = np.max(np.abs(expected))
    np.testing.assert_array_less(np.max(np.abs(actual - expected)) / scale, rtol)


def test_heat_grad_of_the_total_heat():
    gradient = lf.grad(lambda k: heat_solve(k).sum())(xr.DataArray(KAPPA))
    assert isinstance(gradient, xr.DataArray) and gradient.dims == ()
    expected = heat_derivative().sum()
    np.testing.assert_allclose(float(gradient), expected, rtol=1e-9)


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_heat_jacobian_of_the_final_state(transform):
    jac = transform(heat_solve)(xr.DataArray(KAPPA))
    assert isinstance(jac, xr.DataArray)
    assert jac.dims == ("x",)
    np.testing.assert_allclose(jac["x"].values, X)
    assert_relative(jac.values, heat_derivative())


def test_heat_jvp_with_a_float_diffusivity():
    out, tangent = lf.jvp(heat_solve, (KAPPA,), (2.0,))
    growth = 1 - KAPPA * DT * LAMBDA
    assert_relative(out.values, growth**STEPS * np.sin(np.pi * X), rtol=1e-12)
    assert tangent.dims == ("x",)
    assert_relative(tangent.values, 2.0 * heat_derivative())


def test_heat_vjp_pulls_a_weighted_cotangent_back_to_kappa():
    weights = xr.DataArray(np.linspace(-1.0, 2.0, INTERIOR), dims="x", coords={"x": X})
    out, vjp_fn = lf.vjp(heat_solve, xr.DataArray(KAPPA))
    (kappa_bar,) = vjp_fn(weights)
    expected = float(np.sum(weights.values * heat_derivative()))
    np.testing.assert_allclose(float(kappa_bar), expected, rtol=1e-9)


# --- Structures: Jacobians nest output-outer, input-inner ----------------------------

I_COORD = [10.0, 20.0, 30.0]
J_COORD = ["p", "q"]


@pytest.fixture
def inputs():
    return xr.Dataset(
        {"a": ("i", [0.5, -1.5, 2.0]), "b": ("j", [3.0, -0.25])},
        coords={"i": I_COORD, "j": J_COORD},
    )


def outer(ds):
    """out[i, j] = a_i * b_j^2."""
    return ds.a * ds.b**2


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_dataarray_output_of_dataset_input_gives_a_dataset_of_jacobians(transform, inputs):
    jac = transform(outer)(inputs)
    assert isinstance(jac, xr.Dataset)
    assert sorted(jac.data_vars) == ["a", "b"]
    a, b = inputs.a.values, inputs.b.values
    assert jac["a"].dims == ("i", "j", "i_wrt")
    assert jac["b"].dims == ("i", "j", "j_wrt")
    expected_a = np.einsum("ik,j->ijk", np.eye(3), b**2)  # d out_ij / d a_k = delta_ik b_j^2
    expected_b = np.einsum("i,jl,j->ijl", 2 * a, np.eye(2), b)  # d out_ij / d b_l = delta_jl 2 a_i b_j
    np.testing.assert_allclose(jac["a"].values, expected_a, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(jac["b"].values, expected_b, rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(jac["i_wrt"].values, I_COORD)
    assert list(jac["j_wrt"].values) == J_COORD
    np.testing.assert_array_equal(jac["i"].values, I_COORD)


@pytest.mark.parametrize("transform", [lf.jacfwd, lf.jacrev], ids=["jacfwd", "jacrev"])
def test_dataset_output_gives_a_dict_keyed_by_output_variable(transform):
    x = xr.DataArray([0.5, -1.0, 2.0], dims="i", coords={"i": I_COORD})

    def squares_and_cubes(x):
        return xr.Dataset({"square": x**2, "cube_sum": (x**3).sum()})

    jac = transform(squares_and_cubes)(x)
    assert isinstance(jac, dict)
    assert sorted(jac) == ["cube_sum", "square"]
    assert jac["square"].dims == ("i", "i_wrt")
    np.testing.assert_allclose(jac["square"].values, np.diag(2 * x.values), rtol=1e-14, atol=1e-14)
    assert jac["cube_sum"].dims == ("i",)
    np.testing.assert_allclose(jac["cube_sum"].values, 3 * x.values**2, rtol=1e-14)


def test_dataset_output_of_dataset_input_gives_a_dict_of_datasets(inputs):
    def two_outputs(ds):
        return xr.Dataset({"outer": outer(ds), "total": ds.a.sum() + ds.b.sum()})

    jac = lf.jacrev(two_outputs)(inputs)
    assert isinstance(jac, dict) and sorted(jac) == ["outer", "total"]
    assert isinstance(jac["total"], xr.Dataset)
    assert jac["total"]["a"].dims == ("i",)
    np.testing.assert_allclose(jac["total"]["a"].values, np.ones(3))
    np.testing.assert_allclose(jac["total"]["b"].values, np.ones(2))
    assert jac["outer"]["b"].dims == ("i", "j", "j_wrt")
    np.testing.assert_allclose(
        jac["outer"]["b"].values,
        np.einsum("i,jl,j->ijl", 2 * inputs.a.values, np.eye(2), inputs.b.values),
    )
