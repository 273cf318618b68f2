"""One declaration per primitive (issue 25): what lf.jit's compiler reads of a primitive is
declared with it (``prim.fusion``, ``prim.reads_only``, ``prim.keeps_uniform``; the NumPy
call an impl makes, ``impl.lower`` and ``impl.numpy_bound``, which a replay calls directly),
and the declarations are complete and consistent.

Which primitives may fuse: those whose declaration spells them in numexpr (``fusion.numexpr``,
or ``fusion.by_constant``: power by a small constant exponent); the compiler fuses nothing
else (``fusion._fusable``). Which ones must say whether they fuse: every elementwise
primitive whose NumPy counterpart is in numexpr's vocabulary (its functions and operators):
it declares a spelling in numexpr and in CUDA C, or ``Fusion.unfused(reason)``. A new
numexpr function must be mapped here (or listed as no elementwise primitive), so that a
release of numexpr cannot add a silent gap.
"""
import numexpr
import numexpr.expressions
import numpy as np
import pytest

import labeled_func_kernels
from labeled_func_kernels import core, elementwise as ew, special
from labeled_func_kernels.primitive import Fusion, Primitive
from labeled_func.engine.compiler import fusion as compiler_fusion, thresholds
from labeled_func.engine.numpy import dispatch

KERNEL_MODULES = [getattr(labeled_func_kernels, name) for name in labeled_func_kernels.__all__
                  if hasattr(getattr(labeled_func_kernels, name), "__file__")]
ALL_PRIMITIVES = {id(prim): prim for module in KERNEL_MODULES for prim in vars(module).values()
                  if isinstance(prim, Primitive)}.values()
# the elementwise family: kernels/elementwise.py and scipy.special's ufuncs (kernels/special.py)
ELEMENTWISE = [prim for module in (ew, special) for prim in vars(module).values()
               if type(prim) is Primitive and prim.batch is not None
               and getattr(prim.batch, "__qualname__", "").startswith("batch_elementwise")]
SPELLED = [prim for prim in ELEMENTWISE if prim.fusion is not None and prim.fusion.reason is None]

# numexpr's functions -> the elementwise primitive computing NumPy's function of that name
NUMEXPR_FUNCTIONS = {"abs": "absolute", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
                     "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
                     "round": "rint"}
NOT_ELEMENTWISE = {  # numexpr's functions that no elementwise primitive computes
    "complex": "builds a complex array of two real ones: lf.jit never fuses complex values",
    "contains": "of strings",
    "copy": "a copy (core.copy), nothing to compute",
    "ones_like": "a constructor (creation.ones_like)",
    "max": "a reduction", "min": "a reduction", "sum": "a reduction", "prod": "a reduction",
}
# numexpr's operators -> the primitives NumPy's operator of that name computes
NUMEXPR_OPERATORS = {
    "__add__": ["add"], "__sub__": ["subtract"], "__mul__": ["multiply"], "__truediv__": ["divide"],
    "__floordiv__": ["floor_divide"], "__pow__": ["power"], "__mod__": ["remainder"],
    "__lshift__": ["bitwise_left_shift"], "__rshift__": ["bitwise_right_shift"],
    "__and__": ["logical_and", "bitwise_and"], "__or__": ["logical_or", "bitwise_or"],
    "__xor__": ["logical_xor", "bitwise_xor"], "__invert__": ["logical_not", "bitwise_invert"],
    "__neg__": ["negative"], "__pos__": ["positive"],
}
COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
# transcendental functions: the only ones a declaration may call heavy (sqrt, correctly
# rounded in both, is heavy but never rounds differently)
TRANSCENDENTAL = {"exp", "expm1", "log", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                  "tanh", "asinh", "acosh", "atanh", "atan2"}
HEAVY_ALGEBRAIC = {"sqrt"}
# operands of the fused primitives that are no NumPy ufunc
ARITY = {"power": 2, "where": 3, "safe_multiply": 2}


def arity(prim):
    counts = {ufunc.nin for ufunc, registered in dispatch.UFUNCS.items() if registered is prim}
    if prim.name in ARITY:
        counts.add(ARITY[prim.name])
    assert len(counts) == 1, f"{prim.name}: operands {counts or 'unknown'} (add it to ARITY)"
    return counts.pop()


def numexpr_vocabulary():
    """The elementwise primitives numexpr could compute: {name: what in numexpr computes it}."""
    wanted = {}
    for name in numexpr.expressions.functions:
        if name in NOT_ELEMENTWISE:
            continue
        target = NUMEXPR_FUNCTIONS.get(name, name)
        assert isinstance(getattr(ew, target, None), Primitive), (
            f"numexpr's {name}() maps to no elementwise primitive: map it in NUMEXPR_FUNCTIONS or list it in "
            "NOT_ELEMENTWISE")
        wanted[target] = f"{name}()"
    node = numexpr.expressions.ExpressionNode
    operators = {name for name in dir(node) if name.startswith("__") and name not in dir(object)
                 and name not in ("__bool__", "__dict__", "__module__", "__weakref__")
                 and not (name.startswith("__r") and hasattr(node, "__" + name[3:]))}  # reflected
    assert operators == set(NUMEXPR_OPERATORS), "numexpr's operators changed: map them in NUMEXPR_OPERATORS"
    for operator, names in NUMEXPR_OPERATORS.items():
        for target in names:
            wanted[target] = operator
    for target in COMPARISONS:
        wanted[target] = "a comparison"
    return wanted


def test_the_family_is_found():
    assert len(ELEMENTWISE) > 100 and ew.sin in ELEMENTWISE and ew.safe_multiply in ELEMENTWISE
    assert ew.multiply_sum not in ELEMENTWISE  # an einsum: its own batch rule


@pytest.mark.parametrize("name", sorted(numexpr_vocabulary()))
def test_every_primitive_numexpr_computes_declares_whether_it_fuses(name):
    prim = getattr(ew, name)
    assert isinstance(prim.fusion, Fusion), (
        f"{name} ({numexpr_vocabulary()[name]} in numexpr) declares no fusion: give its row in "
        "kernels/elementwise.py fusion=_spelled(numexpr, cuda) or fusion=Fusion.unfused(reason)")
    if prim.fusion.reason is not None:
        assert len(prim.fusion.reason) > 20 and prim.fusion.numexpr is prim.fusion.cuda is None
    else:
        assert prim in SPELLED


def test_only_elementwise_primitives_fuse():
    for prim in ALL_PRIMITIVES:
        if prim.fusion is not None and prim.fusion.reason is None:
            assert prim in ELEMENTWISE, prim.name


@pytest.mark.parametrize("prim", SPELLED, ids=lambda p: p.name)
def test_a_fusable_primitive_has_both_spellings_of_its_operands(prim):
    fusion, count = prim.fusion, arity(prim)
    if fusion.by_constant is not None:  # the constant is written into the spelling
        assert fusion.numexpr is None and fusion.cuda is None and fusion.by_constant
        for constant, text in fusion.by_constant.items():
            assert type(constant) is float and Fusion.operands(text) == {0}, (constant, text)
        return
    assert fusion.numexpr is not None, f"{prim.name} fuses on CuPy but has no numexpr spelling"
    assert fusion.cuda is not None, f"{prim.name} fuses on NumPy but has no CUDA C spelling"
    for text in (fusion.numexpr, fusion.cuda):
        assert Fusion.operands(text) == set(range(count)), f"{prim.name}: {text!r} for {count} operands"
        formatted = text.format(*[f"v{k}" for k in range(count)])
        assert "{" not in formatted and "}" not in formatted


@pytest.mark.parametrize("prim", [p for p in SPELLED if p.fusion.numexpr is not None], ids=lambda p: p.name)
def test_a_numexpr_spelling_compiles(prim):
    count, fusion = arity(prim), prim.fusion
    types = [bool] * count if fusion.logical else [np.float64] * count
    if prim is ew.where:
        types = [bool, np.float64, np.float64]
    names = [f"v{k}" for k in range(count)]
    numexpr.NumExpr(fusion.numexpr.format(*names), signature=list(zip(names, types)))


@pytest.mark.parametrize("prim", SPELLED, ids=lambda p: p.name)
def test_the_cost_class_and_the_rounding_are_those_of_the_function(prim):
    fusion = prim.fusion
    heavy = prim.name in TRANSCENDENTAL | HEAVY_ALGEBRAIC
    assert (fusion.cost == "heavy") == heavy, f"{prim.name}: cost {fusion.cost!r}"
    assert fusion.rounds_differently == (prim.name in TRANSCENDENTAL), prim.name
    assert not fusion.logical or fusion.boolean_result, prim.name  # a logical operation gives booleans
    if fusion.boolean_result:
        assert prim.name in COMPARISONS or fusion.logical or prim is ew.where, prim.name


def test_a_declaration_is_spelled_or_unfused_for_a_reason():
    with pytest.raises(ValueError):
        Fusion()
    with pytest.raises(ValueError):
        Fusion("sin({})", "sin({})", reason="both")
    with pytest.raises(ValueError):
        Fusion("sin({})", "sin({})", cost="expensive")
    with pytest.raises(ValueError):
        Fusion("({0} * {0})", by_constant={2.0: "({0} * {0})"})
    assert Fusion.operands("where(({0} == 0) & (({1} - {1}) != 0), 0, {0} * {1})") == {0, 1}
    assert Fusion.operands("({} ? {} : {})") == {0, 1, 2}


def test_the_compiler_reads_the_declaration(monkeypatch):
    """Whether a node may fuse is its primitive's declaration: without a spelling, sin does not."""
    x = np.linspace(0.0, 1.0, max(thresholds.FUSE_MIN_SIZE, 1))
    out = np.sin(x)
    assert compiler_fusion._fusable(ew.sin, {}, (x,), out) is not None
    monkeypatch.setattr(ew.sin, "fusion", Fusion.unfused("a test"))
    assert compiler_fusion._fusable(ew.sin, {}, (x,), out) is None
    assert compiler_fusion._fusable(ew.power, {}, (x, 2), out) is not None  # by its constant
    assert compiler_fusion._fusable(ew.power, {}, (x, 5), out) is None


def test_the_other_facts_the_compiler_reads():
    assert ew.multiply_sum.reads_only  # an einsum into a fresh array
    assert {prim for prim in ALL_PRIMITIVES if prim.reads_only} == {ew.multiply_sum}
    views = {core.expand_dims, core.broadcast_to, core.reshape, core.transpose, core.squeeze}
    assert {prim for prim in ALL_PRIMITIVES if prim.keeps_uniform} == views


def _same_array(got, want):
    """The same values (NaN where NaN, signed zeros by their bits), dtype, shape, strides, and
    the same answer to whether it views the input."""
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    assert got.strides == want.strides
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


def test_a_numpy_bound_call_is_the_call_the_impl_makes():
    """``impl.numpy_bound(**params)`` (declared with reshape, transpose, astype and getitem:
    a replay of NumPy arrays calls it instead of the impl) gives what the impl gives: values,
    dtype, layout, and a view where the impl returns a view."""
    from labeled_func_kernels import indexing
    from labeled_func_kernels.indexing import Slot
    base = np.arange(-12.0, 12.0).reshape(2, 3, 4) * -0.0 + np.arange(24.0).reshape(2, 3, 4)
    base[0, 0, 0] = -0.0
    inputs = [base, base.transpose(2, 0, 1), base[:, ::2], np.asfortranarray(base)]
    cases = [(core.reshape, {"shape": (-1, 4)}), (core.reshape, {"shape": (-1,)}), (core.reshape, {"shape": (2, 1, -1)}),
             (core.transpose, {"axes": (2, 0, 1)}), (core.transpose, {"axes": [1, 0, 2]}),
             (ew.astype, {"dtype": np.float32}), (ew.astype, {"dtype": np.bool_}), (ew.astype, {"dtype": np.dtype("i8")}),
             (indexing.getitem, {"template": (slice(None), 0)}), (indexing.getitem, {"template": (Ellipsis, None, slice(1, None, 2))}),
             (indexing.getitem, {"template": (1, slice(None, None, -1), Ellipsis)}),
             (indexing.pad, {"pad_width": ((1, 0), (0, 0), (2, 3)), "constant_values": ((0.0, 0.0), (0, 0), (-0.0, 7.5))}),
             (indexing.pad, {"pad_width": ((0, 0), (1, 1), (0, 0)), "constant_values": ((0, 0), (np.nan, -np.inf), (0, 0))})]
    for prim, params in cases:
        for x in inputs:
            want = prim.impl(x, **params)
            got = prim.impl.numpy_bound(**params)(x)
            _same_array(got, want)
            assert np.shares_memory(got, x) == np.shares_memory(want, x), (prim, params)
    assert indexing.getitem.impl.numpy_bound(template=(Slot(0),)) is None  # an index array: the impl's way


def test_the_replay_calls_the_declared_numpy_calls_with_the_same_results():
    """A jitted Hessian (slices, reshapes, a transpose, x ** 2, NaN-safe masks) replays with
    the declared NumPy calls (``numpy_bound``; ``x * x`` for ``x ** 2``; the NumPy
    ``safe_masked``), and gives the un-jitted bytes for finite and non-finite states (a
    mask that applies on the replay, none at the trace)."""
    import operator
    import xarray as xr
    import labeled_func as lf
    from labeled_func.engine.replay import safe_masked

    def rosenbrock(x):
        head = x.isel(d=slice(None, -1)).drop_vars("d", errors="ignore")
        tail = x.isel(d=slice(1, None)).drop_vars("d", errors="ignore")
        return (100.0 * (tail - head**2) ** 2 + (1.0 - head) ** 2).sum("d")

    hessian = lf.hessian(rosenbrock)
    jitted = lf.jit(hessian)
    x = xr.DataArray(np.random.default_rng(3).uniform(-2.0, 2.0, 30), dims="d")
    jitted(x)
    for special in (None, np.inf, -np.inf, np.nan, -0.0):
        y = x.copy()
        if special is not None:
            y[7] = special
        with np.errstate(all="ignore"):
            got, want = jitted(y).values, hessian(y).values
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        finite = ~np.isnan(want)
        np.testing.assert_array_equal(got.view(np.uint64)[finite], want.view(np.uint64)[finite])
    (compiled,) = jitted.cache.values()
    called = [entry[0] for entry in compiled.program._plan]
    assert any(type(f) in (operator.itemgetter, operator.methodcaller) for f in called)
    assert safe_masked in called and ew._times_itself in called


def test_a_square_lowered_to_a_product_has_the_impls_bits():
    for dtype in (np.float64, np.float32):
        x = np.array([-0.0, 0.0, 1.5, -3.25, np.inf, -np.inf, np.nan, np.finfo(dtype).max, np.finfo(dtype).tiny],
                     dtype=dtype)
        function = ew.power.impl.lower(x, 2)
        assert function is ew._times_itself
        with np.errstate(over="ignore", under="ignore"):
            want = ew.power.impl(x, 2)
            got = function(x, 2)
        np.testing.assert_array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))
    assert ew.power.impl.lower(np.arange(3), 2) is None  # integers: NumPy's own square
    assert ew.power.impl.lower(np.ones(3), 3) is None
