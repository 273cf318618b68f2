"""lf.sensitivity.dgsm: the blocks of samples replay one lf.jit program (progress, chunk_size,
Dask chunks, an lf.jit-wrapped model), the per-sample gradients (return_gradients) and
lf.sensitivity.plot_indices."""
import gc
import warnings

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf
from labeled_func import sensitivity

from stepping_model import STEPPING_BOUNDS as BOUNDS, counted, stepping  # noqa: E402


def field(p):
    """An output along t (the Jacobian modes of a field)."""
    t = xr.DataArray(np.linspace(0.0, 2.0, 5), dims="t")
    return p.K * np.exp(-p.r * t) + p.h * t ** 2


def samples_of(n, seed=0, coords=False):
    rng = np.random.default_rng(seed)
    samples = xr.Dataset({name: ("sample", rng.uniform(low, high, n)) for name, (low, high) in BOUNDS.items()})
    return samples.assign_coords(sample=np.arange(n) * 10, run=("sample", np.arange(n) % 3)) if coords else samples


def silent(done, total):
    return None


# --- blocks in memory: one trace, the un-jitted results ------------------------------------------
@pytest.mark.parametrize(("n", "options"), [
    (1000, {"progress": silent}),                 # ten blocks of 100
    (1003, {"progress": silent}),                 # ten blocks of 101, the last padded by 6
    (1003, {"chunk_size": 300}),                  # four blocks of 251, the last padded by 1
    (10, {"chunk_size": 3}),                      # four blocks of 3, the last padded by 2
])
def test_blocks_replay_one_program_and_give_the_unjitted_results(n, options):
    samples = samples_of(n)
    model = counted(stepping)
    jitted = sensitivity.dgsm(model, samples, bounds=BOUNDS, seed=0, **options)
    assert model.calls == 1
    plain_model = counted(stepping)
    plain = sensitivity.dgsm(plain_model, samples, bounds=BOUNDS, seed=0, jit=False, **options)
    assert plain_model.calls > 1
    xr.testing.assert_identical(jitted, plain)
    xr.testing.assert_identical(jitted, sensitivity.dgsm(stepping, samples, bounds=BOUNDS, seed=0))


def test_progress_counts_the_same_steps_jitted():
    steps = []
    sensitivity.dgsm(stepping, samples_of(1003), num_resamples=10, progress=lambda d, t: steps.append((d, t)))
    assert steps == [(k, 11) for k in range(1, 12)]


def test_coordinates_along_the_samples_do_not_retrace():
    samples = samples_of(999, coords=True)
    model = counted(stepping)
    jitted = sensitivity.dgsm(model, samples, bounds=BOUNDS, seed=0, chunk_size=100, return_gradients=True)
    assert model.calls == 1
    plain = sensitivity.dgsm(stepping, samples, bounds=BOUNDS, seed=0, chunk_size=100, jit=False,
                             return_gradients=True)
    xr.testing.assert_identical(jitted, plain)
    np.testing.assert_array_equal(jitted.gradients["sample"].values, samples["sample"].values)
    np.testing.assert_array_equal(jitted.gradients["run"].values, samples["run"].values)


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_an_output_field_in_every_mode(mode):
    samples = samples_of(501)
    model = counted(field)
    jitted = sensitivity.dgsm(model, samples, bounds=BOUNDS, seed=0, mode=mode, chunk_size=100,
                              return_gradients=True)
    assert model.calls == (2 if mode == "auto" else 1)  # "auto" runs the model, then its Jacobian
    plain = sensitivity.dgsm(field, samples, bounds=BOUNDS, seed=0, mode=mode, jit=False, return_gradients=True)
    xr.testing.assert_allclose(jitted, plain, rtol=1e-12, atol=0)
    xr.testing.assert_identical(jitted.drop_vars(list(jitted.data_vars)), plain.drop_vars(list(plain.data_vars)))


def test_a_salib_model_on_an_array_replays_too():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    X = np.random.default_rng(1).uniform(0, 1, (1001, 2))
    model = counted(lambda X: 3 * X[:, 0] + np.sin(X[:, 1]) * X[:, 0])
    jitted = sensitivity.dgsm(model, X, problem=problem, seed=0, progress=silent)
    assert model.calls == 1
    xr.testing.assert_identical(jitted, sensitivity.dgsm(model, X, problem=problem, seed=0, jit=False))


def test_jit_true_jits_one_block_and_matches():
    samples = samples_of(300)
    model = counted(stepping)
    xr.testing.assert_identical(sensitivity.dgsm(model, samples, bounds=BOUNDS, seed=0, jit=True),
                                sensitivity.dgsm(model, samples, bounds=BOUNDS, seed=0, jit=False))
    assert model.calls == 2


@pytest.mark.parametrize(("option", "value"), [("jit", "yes"), ("jit", 1), ("return_gradients", None),
                                               ("return_gradients", 1)])
def test_jit_and_return_gradients_are_checked(option, value):
    with pytest.raises(ValueError, match=f"{option}="):
        sensitivity.dgsm(stepping, samples_of(10), **{option: value})


# --- Dask: the blocks run one program per block shape ------------------------------------------------
def test_dask_blocks_replay_and_give_the_in_memory_results():
    pytest.importorskip("dask")
    samples = samples_of(400)
    model = counted(stepping)
    lazy = sensitivity.dgsm(model, samples.chunk(sample=50), bounds=BOUNDS, seed=0, return_gradients=True)
    built = model.calls
    result = lazy.compute(scheduler="synchronous")
    assert model.calls - built == 1                      # eight chunks of 50: one trace
    plain_model = counted(stepping)
    sensitivity.dgsm(plain_model, samples.chunk(sample=50), bounds=BOUNDS, seed=0,
                     jit=False).compute(scheduler="synchronous")
    assert plain_model.calls - built == 8                 # un-jitted: every chunk runs the model
    in_memory = sensitivity.dgsm(stepping, samples, bounds=BOUNDS, seed=0, jit=False, return_gradients=True)
    xr.testing.assert_allclose(result, in_memory, rtol=1e-12, atol=0)


# --- an lf.jit-wrapped model ------------------------------------------------------------------------
def test_a_jitted_model_jits_the_whole_gradient_and_keeps_its_program():
    model = counted(stepping)
    fast = lf.jit(model)
    samples = samples_of(256)
    first = sensitivity.dgsm(fast, samples, bounds=BOUNDS, seed=0)
    second = sensitivity.dgsm(fast, samples * 1.01, bounds=BOUNDS, seed=0)
    assert model.calls == 1                               # traced once, replayed in the second call
    assert fast.traces == 0                               # its own program is not the one that runs
    xr.testing.assert_identical(first, sensitivity.dgsm(stepping, samples, bounds=BOUNDS, seed=0))
    xr.testing.assert_identical(second, sensitivity.dgsm(stepping, samples * 1.01, bounds=BOUNDS, seed=0))
    sensitivity.dgsm(fast, samples, seed=0, mode="forward")   # other options: a program of their own
    assert model.calls == 2


def test_a_jitted_salib_model():
    problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    X = np.random.default_rng(1).uniform(0, 1, (200, 2))
    model = counted(lambda X: 3 * X[:, 0] + X[:, 1] ** 2)
    fast = lf.jit(model)
    result = sensitivity.dgsm(fast, X, problem=problem, seed=0)
    sensitivity.dgsm(fast, X * 0.5, problem=problem, seed=0)
    assert model.calls == 1
    xr.testing.assert_identical(result, sensitivity.dgsm(model, X, problem=problem, seed=0))


def test_the_programs_of_a_jitted_model_go_with_it():
    fast = lf.jit(counted(stepping))
    sensitivity.dgsm(fast, samples_of(20), seed=0)
    assert fast in sensitivity._PROGRAMS
    count = len(sensitivity._PROGRAMS)
    del fast
    gc.collect()
    assert len(sensitivity._PROGRAMS) == count - 1


# --- a model lf.jit cannot trace: un-jitted, as before ---------------------------------------------
def looping(p):
    """Reverse mode through a loop whose number of iterations depends on the values: lf.jit refuses."""
    return lf.while_loop(lambda s: s[1] < 3, lambda s: (s[0] + 1, s[1] * p.r), (xr.DataArray(0), p.r * 1.0))[1]


def loop_samples():
    return xr.Dataset({"r": ("sample", np.linspace(1.5, 2.0, 60))})


def test_a_model_lf_jit_refuses_runs_unjitted():
    samples = loop_samples()
    plain = sensitivity.dgsm(looping, samples, seed=0, jit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # a plain model: no warning
        xr.testing.assert_identical(sensitivity.dgsm(looping, samples, seed=0, progress=silent), plain)
    fast = lf.jit(looping)
    with pytest.warns(UserWarning, match="could not trace the per-sample gradients of looping"):
        xr.testing.assert_identical(sensitivity.dgsm(fast, samples, seed=0), plain)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # refused once: not tried again
        xr.testing.assert_identical(sensitivity.dgsm(fast, samples, seed=0), plain)
    with pytest.raises(lf.UnsupportedOperationError, match="while_loop under lf.jit"):
        sensitivity.dgsm(looping, samples, jit=True)


def test_a_model_lf_jit_refuses_runs_unjitted_on_dask():
    pytest.importorskip("dask")
    samples = loop_samples()
    plain = sensitivity.dgsm(looping, samples, seed=0, jit=False)
    lazy = sensitivity.dgsm(looping, samples.chunk(sample=20), seed=0)
    xr.testing.assert_allclose(lazy.compute(scheduler="synchronous"), plain, rtol=1e-12, atol=0)
    with pytest.raises(lf.UnsupportedOperationError, match="while_loop under lf.jit"):
        sensitivity.dgsm(looping, samples.chunk(sample=20), jit=True).compute(scheduler="synchronous")


def test_a_model_error_is_the_models_own():
    def broken(p):
        raise KeyError("no such parameter")

    with pytest.raises(KeyError, match="no such parameter"):
        sensitivity.dgsm(broken, samples_of(30), progress=silent)


# --- per-sample gradients --------------------------------------------------------------------------
@pytest.mark.parametrize("options", [{}, {"progress": silent}, {"jit": False, "chunk_size": 7}])
def test_return_gradients_are_vmap_grad(options):
    samples = samples_of(103)
    result = sensitivity.dgsm(stepping, samples, bounds=BOUNDS, seed=0, return_gradients=True, **options)
    oracle = lf.vmap(lf.grad(stepping), dim="sample")(samples)
    assert result.gradients.dims == ("sample", "param")
    assert result.gradients["param"].values.tolist() == list(BOUNDS)
    for name in BOUNDS:
        np.testing.assert_allclose(result.gradients.sel(param=name).values, oracle[name].values, rtol=1e-12, atol=0)
    without = sensitivity.dgsm(stepping, samples, bounds=BOUNDS, seed=0, **options)
    xr.testing.assert_identical(result.drop_vars("gradients"), without)
    np.testing.assert_array_equal(result.vi.values, (result.gradients ** 2).mean("sample").values)


def test_return_gradients_of_an_output_field():
    samples = samples_of(40)
    result = sensitivity.dgsm(field, samples, return_gradients=True, chunk_size=16)
    assert result.gradients.dims == ("sample", "param", "t")
    oracle = lf.vmap(lf.jacfwd(field), dim="sample")(samples)
    for name in BOUNDS:
        np.testing.assert_allclose(result.gradients.sel(param=name).transpose("sample", "t").values,
                                   oracle[name].transpose("sample", "t").values, rtol=1e-12, atol=0)
    assert result.gradients.attrs["long_name"].startswith("per-sample partial derivative")


def test_return_gradients_on_dask_are_lazy():
    pytest.importorskip("dask")
    samples = samples_of(120)
    lazy = sensitivity.dgsm(stepping, samples.chunk(sample=40), seed=0, return_gradients=True)
    assert lazy.gradients.chunks is not None
    oracle = lf.vmap(lf.grad(stepping), dim="sample")(samples)
    np.testing.assert_allclose(lazy.gradients.sel(param="r").values, oracle.r.values, rtol=1e-12, atol=0)


# --- plot_indices ----------------------------------------------------------------------------------
@pytest.fixture
def pyplot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    yield plt
    plt.close("all")


@pytest.fixture
def result():
    return sensitivity.dgsm(stepping, samples_of(200), bounds=BOUNDS, seed=0, num_resamples=20)


def test_plot_indices_draws_one_bar_per_parameter(pyplot, result):
    ax = sensitivity.plot_indices(result, "ST_bound")
    assert len(ax.patches) == len(BOUNDS)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(BOUNDS)
    np.testing.assert_allclose([bar.get_height() for bar in ax.patches], result.ST_bound.values)
    assert ax.get_ylabel() == result.ST_bound.attrs["long_name"]
    ax = sensitivity.plot_indices(result.ST_bound)
    assert len(ax.patches) == len(BOUNDS)


def test_plot_indices_draws_error_bars_from_conf(pyplot, result):
    fig, ax = pyplot.subplots()
    assert sensitivity.plot_indices(result, ax=ax) is ax
    assert len(ax.patches) == 2 * len(BOUNDS)               # dgsm and ST_bound
    from matplotlib.container import BarContainer
    dgsm_bars, bound_bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert dgsm_bars.errorbar is not None and bound_bars.errorbar is None
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["dgsm", "ST_bound"]
    segments = dgsm_bars.errorbar.lines[2][0].get_segments()
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segments], 2 * result.dgsm_conf.values)


def test_plot_indices_without_bounds_draws_vi(pyplot):
    result = sensitivity.dgsm(stepping, samples_of(50), seed=0, num_resamples=5)
    ax = sensitivity.plot_indices(result)
    from matplotlib.container import BarContainer
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(ax.patches) == len(BOUNDS) and bars.errorbar is not None
    assert ax.get_ylabel() == result.vi.attrs["long_name"]


def test_plot_indices_refuses_what_it_cannot_draw(pyplot):
    field_result = sensitivity.dgsm(field, samples_of(30), bounds=BOUNDS, seed=0, num_resamples=5)
    with pytest.raises(ValueError, match=r"select or reduce \['t'\] first"):
        sensitivity.plot_indices(field_result)
    assert len(sensitivity.plot_indices(field_result.isel(t=1)).patches) == 2 * len(BOUNDS)
    with pytest.raises(ValueError, match="no variables"):
        sensitivity.plot_indices(field_result, ["S1"])
    with pytest.raises(ValueError, match="not \\('param',\\)"):
        sensitivity.plot_indices(xr.DataArray([1.0, 2.0], dims="x"))
    with pytest.raises(ValueError, match="Dataset or DataArray"):
        sensitivity.plot_indices([1.0, 2.0])
