"""SALib interop of lf.sensitivity.dgsm: its problem dict, its (N, D) sample arrays and
models, its result names.  Oracles: the Dataset API on the same points, closed-form
gradients and, when SALib is installed, SALib's own finite-difference DGSM."""
import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

A, B = 7.0, 0.1
NAMES = ["x1", "x2", "x3"]
PROBLEM = {"num_vars": 3, "names": NAMES, "bounds": [[-np.pi, np.pi]] * 3}


def ishigami_rows(X):
    """The Ishigami function as SALib writes models: an (n, D) array to n outputs."""
    return np.sin(X[:, 0]) + A * np.sin(X[:, 1]) ** 2 + B * X[:, 2] ** 4 * np.sin(X[:, 0])


def ishigami(p):
    return np.sin(p.x1) + A * np.sin(p.x2) ** 2 + B * p.x3 ** 4 * np.sin(p.x1)


def sample_matrix(n=2000, seed=0):
    return np.random.default_rng(seed).uniform(-np.pi, np.pi, (n, 3))


def test_an_array_with_a_problem_gives_the_dataset_result():
    X = sample_matrix()
    from_array = lf.sensitivity.dgsm(ishigami_rows, X, problem=PROBLEM, num_resamples=20, seed=3)
    samples = xr.Dataset({name: ("sample", X[:, j]) for j, name in enumerate(NAMES)})
    from_dataset = lf.sensitivity.dgsm(ishigami, samples, bounds={n: (-np.pi, np.pi) for n in NAMES},
                                       num_resamples=20, seed=3)
    xr.testing.assert_allclose(from_array, from_dataset, rtol=1e-12)
    gradient = [np.cos(X[:, 0]) * (1 + B * X[:, 2] ** 4), A * np.sin(2 * X[:, 1]), 4 * B * X[:, 2] ** 3 * np.sin(X[:, 0])]
    np.testing.assert_allclose(from_array.vi.values, [np.mean(g ** 2) for g in gradient], rtol=1e-12)
    assert from_array.param.values.tolist() == NAMES


def test_a_problem_with_dataset_samples_orders_the_parameters_by_its_names():
    X = sample_matrix(300)
    samples = xr.Dataset({name: ("sample", X[:, j]) for j, name in reversed(list(enumerate(NAMES)))})
    result = lf.sensitivity.dgsm(ishigami, samples, problem=PROBLEM, num_resamples=5)
    assert result.param.values.tolist() == NAMES
    with pytest.raises(ValueError, match=r"problem\['names'\]"):
        lf.sensitivity.dgsm(ishigami, samples, problem={**PROBLEM, "names": ["x1", "x2", "x4"]})


def test_to_dataframe_has_salibs_columns_first():
    result = lf.sensitivity.dgsm(ishigami_rows, sample_matrix(300), problem=PROBLEM, num_resamples=5)
    frame = result.to_dataframe()
    assert list(frame.columns[:4]) == ["vi", "vi_std", "dgsm", "dgsm_conf"]
    assert list(frame.index) == NAMES


@pytest.mark.parametrize("problem, culprit", [
    ({"names": NAMES}, "'names' and 'bounds'"),
    ([("x1", -1, 1)], "'names' and 'bounds'"),
    ({"names": NAMES, "bounds": [[0, 1]] * 2}, "'bounds': 2"),
    ({**PROBLEM, "num_vars": 4}, "'num_vars': 4"),
    ({**PROBLEM, "dists": ["unif", "unif", "gamma"]}, "'gamma' for 'x3'"),
    ({**PROBLEM, "dists": ["unif", "norm", "unif"], "bounds": [[0, 1], [0, -1], [0, 1]]}, "'x2'.*std > 0"),
    ({**PROBLEM, "bounds": [[0, 1], [1, 0], [0, 1]]}, "'x2'.*low < high"),
    ({**PROBLEM, "groups": ["a", "a", "b"]}, "groups"),
    ({**PROBLEM, "names": ["x1", "x1", "x3"]}, "distinct"),
])
def test_bad_problems_raise_naming_the_entry(problem, culprit):
    with pytest.raises(ValueError, match=culprit):
        lf.sensitivity.dgsm(ishigami_rows, sample_matrix(20), problem=problem)


def test_bad_arrays_and_array_models_raise():
    X = sample_matrix(20)
    with pytest.raises(ValueError, match="give problem="):
        lf.sensitivity.dgsm(ishigami_rows, X)
    with pytest.raises(ValueError, match="3 columns and problem\\['names'\\] 2 names"):
        lf.sensitivity.dgsm(ishigami_rows, X, problem={"names": ["a", "b"], "bounds": [[0, 1]] * 2})
    with pytest.raises(ValueError, match=r"must return n outputs; it returned shape \(1, 3\)"):
        lf.sensitivity.dgsm(lambda X: X ** 2, X, problem=PROBLEM)
    with pytest.raises(ValueError, match="samples must be a Dataset"):
        lf.sensitivity.dgsm(ishigami_rows, X[:, 0], problem=PROBLEM)


# --- against SALib itself ---------------------------------------------------------------------
def test_salib_finite_differences_agree_on_ishigami():
    pytest.importorskip("SALib")
    from SALib.analyze import dgsm as salib_dgsm
    from SALib.sample import finite_diff
    from SALib.test_functions import Ishigami

    delta = 1e-5   # SALib's step, relative to x: its truncation error is then about 1e-5 of vi
    X = finite_diff.sample(PROBLEM, 2 ** 11, delta=delta, seed=1)
    salib = salib_dgsm.analyze(PROBLEM, X, Ishigami.evaluate(X), num_resamples=300, seed=1)
    base = X[:: len(NAMES) + 1]   # the base point of each group of D + 1 rows
    ours = lf.sensitivity.dgsm(Ishigami.evaluate, base, problem=PROBLEM, num_resamples=300, seed=1)

    salib_frame, our_frame = salib.to_df(), ours.to_dataframe()
    assert list(our_frame.columns[:4]) == list(salib_frame.columns)
    assert list(our_frame.index) == list(salib_frame.index)
    for column in ("vi", "vi_std", "dgsm"):
        np.testing.assert_allclose(our_frame[column], salib_frame[column], rtol=1e-3, err_msg=column)
    # SALib's dgsm_conf is the half-width of vi's interval (calc_dgsm resamples vi only):
    # ours is vi_conf; both are bootstraps of 300 resamples, about 4 % apart each
    np.testing.assert_allclose(our_frame["vi_conf"], salib_frame["dgsm_conf"], rtol=0.2)
