"""Every member of ``np.ndarray`` and ``xr.DataArray`` has an answer under every transform.

The walk runs at test time over ``dir(np.ndarray)`` (the members a traced array, the duck
array xarray holds, stands in for) and ``dir(xr.DataArray)`` (public names and dunders), so a
new NumPy or xarray release cannot add a silent gap: each name must be in exactly one table.

* ``NDARRAY`` / ``DATAARRAY``: one or more calls per name, each with what it does under
  ``lf.vmap``, ``lf.grad``, ``lf.jvp`` and ``lf.jit``:

  - works (the default): vmap equals the per-example loop of the plain call; jit equals the
    plain call, on the call that records and on a second one that replays; grad and jvp give
    the plain call's values, and derivatives equal central finite differences (grad: the
    directional derivative of a fixed linear loss of the outputs; jvp: the tangent of every
    floating output; integer and boolean outputs carry a zero tangent);
  - raises a documented ``lf.TransformError`` subclass whose message names the operation;
  - ``like_plain``: raises what the plain call raises (same exception type, NumPy's or
    xarray's message first, no internal class named): where NumPy or xarray refuse the call
    themselves (``round(da, 1)``, ``del x[0]``), a transform must not change the answer.

* ``NDARRAY_ABSENT``: attributes a traced array does not define on purpose, with the reason
  (protocols whose mere presence changes what NumPy, xarray or other libraries do, and
  descriptions of a concrete array's memory);
* ``*_PLUMBING``: Python's and the libraries' object plumbing, no computation on values.

The end of the file checks ``np.vectorize`` with gufunc signatures against NumPy's own (the
path of ``DataArray.curvefit`` and of ``xr.apply_ufunc(..., vectorize=True)``).
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import io
import operator
import pickle
from typing import Callable

import numpy as np
import pytest
import xarray as xr

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from helpers_coverage import assert_same, loop_vmap
except ImportError:  # pragma: no cover
    from tests.helpers_coverage import assert_same, loop_vmap

pytestmark = [  # the deprecated aliases are members too, and are called
    pytest.mark.filterwarnings("ignore:dropping variables using `drop` is deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore:reset_encoding is deprecated:UserWarning"),
]
TRANSFORMS = ("vmap", "grad", "jvp", "jit")
H = 1e-6
RNG = np.random.default_rng(20261201)


def _signed(shape):
    """Magnitudes in [0.5, 2] with random signs, two decimals plus 0.003: far from 0, from
    the integers and from the ties of rounding to one or two decimals (floor, round and
    divmod have no jump within a finite difference)."""
    values = np.round(RNG.uniform(0.5, 2.0, shape), 2) + 0.003
    return values * RNG.choice([-1.0, 1.0], shape)


X = _signed((3, 4))
X2 = _signed((3, 4))  # the second call of a jitted function: a replay
BATCH = np.stack([X, X2])
DIRECTION = RNG.normal(size=(3, 4))


@dataclasses.dataclass(frozen=True)
class Case:
    """One call of a member: ``call(x)``, and what each transform does with it.

    ``raises``: {transform: (error class, regex the message must match)}; the transforms not
    listed work.  ``like_plain``: every transform raises what the plain call raises.
    ``known_failure``: the reason of a product bug the case reveals (strict xfail)."""

    call: Callable
    raises: dict = dataclasses.field(default_factory=dict)
    like_plain: bool = False
    known_failure: str | None = None


def works(call):
    return Case(call)


def raises(call, error, match, transforms=TRANSFORMS):
    return Case(call, {t: (error, match) for t in transforms})


def policy(call, error, match):
    """Refused where a value stands for many (vmap, jit); on the primal under grad and jvp
    (torch.func's policy for .item(), float(), bool())."""
    return raises(call, error, match, ("vmap", "jit"))


def like_plain(call):
    return Case(call, like_plain=True)


def ints(a):
    """An integer array made from ``a``: traced under vmap and jit (under grad and jvp
    integer values carry no derivative and are plain arrays)."""
    return np.floor(a * 3).astype(np.int64)


def in_place(method, make=lambda a: a.copy()):
    """``method(b)`` on a fresh ``b = make(a)`` (in-place operators and methods), then ``b``."""

    def call(a):
        b = make(a)
        out = method(b)
        return b if out is None or out is b else out

    return call


def _written_flat(a):
    b = a.copy()
    b.flat[[1, 5]] = a[0, :2] * 3.0
    b.flat[8:] = a[1, :2]  # NumPy repeats the values over the selection
    return b


def _inplace_binary(update, make, other):
    """``b = make(a); b <op>= other`` with ``update`` one of ``operator.iadd``, ``operator.ilshift``..."""
    return in_place(lambda b: update(b, other), make)


# --------------------------------------------------------------------- ndarray (the tracer)
NDARRAY_ABSENT = {
    "__array_interface__": "NumPy reads an object's memory through it (np.asarray would bypass the "
                           "conversion policy); its presence is what NumPy tests",
    "__array_struct__": "the C form of __array_interface__: NumPy would read the memory",
    "__array_namespace__": "xarray prefers an array-API namespace when an array has one, which "
                           "breaks vectorized indexing (ARCHITECTURE.md)",
    "__dlpack__": "hands the memory to another library (np.from_dlpack, CuPy, torch), which "
                  "tests hasattr: the conversion policy would be bypassed",
    "__dlpack_device__": "half of the DLPack protocol: present only with __dlpack__",
    "__array_wrap__": "NumPy calls it on outputs of subclasses and of functions that do not "
                      "dispatch; NEP-13/18 dispatch makes it unnecessary",
    "__array_finalize__": "the ndarray-subclass construction hook: a tracer is not a subclass",
    "__class_getitem__": "typing only (np.ndarray[shape, dtype] annotations)",
    "__setstate__": "unpickling an ndarray in place; a traced value is never unpickled (pickling "
                    "raises ConversionError)",
    "base": "the array owning the memory: a traced value has values, not memory; probed with "
            "getattr(x, 'base', None) (pandas), so a raising property would break those probes",
    "ctypes": "a C pointer to the memory",
    "data": "a memoryview of the memory (the buffer protocol); duck-typing code takes objects "
            "with .data for xarray containers",
    "flags": "flags of the memory (contiguity, writeability, ownership)",
    "strides": "the memory layout in bytes",
}

NDARRAY_PLUMBING = {
    "__class__", "__delattr__", "__dir__", "__doc__", "__getattribute__", "__getstate__",
    "__init__", "__init_subclass__", "__new__", "__setattr__", "__sizeof__", "__subclasshook__",
    "__hash__",  # None on both: unhashable
    "__array_priority__",  # a number NumPy compares (the tracer's wins over ndarray's)
}

NDARRAY: dict[str, list[Case]] = {
    # values and their description
    "T": [works(lambda a: a.T)],
    "mT": [works(lambda a: a.mT)],
    "real": [works(lambda a: (a + 2j * a).real), works(lambda a: a.real * 2.0)],
    "imag": [works(lambda a: (a - 1j * a * a).imag), works(lambda a: a + a.imag)],
    "dtype": [works(lambda a: a.astype(a.dtype) * 2.0)],
    "shape": [works(lambda a: a.reshape(a.shape[::-1]))],
    "ndim": [works(lambda a: a * a.ndim)],
    "size": [works(lambda a: a * a.size)],
    "itemsize": [works(lambda a: a * a.itemsize)],
    "nbytes": [works(lambda a: a * a.nbytes)],
    "device": [works(lambda a: a * (a.device == "cpu"))],
    "to_device": [works(lambda a: a.to_device("cpu") * 2.0)],
    "__len__": [works(lambda a: a * len(a))],
    "__iter__": [works(lambda a: np.stack([row * i for i, row in enumerate(a)]))],
    "__repr__": [works(lambda a: a * (len(repr(a)) > 0))],
    "__str__": [works(lambda a: a * (len(str(a)) > 0))],
    "__copy__": [works(lambda a: copy.copy(a) * 2.0)],
    "__deepcopy__": [works(lambda a: copy.deepcopy(a) * 2.0)],
    "__array_ufunc__": [works(lambda a: np.add(a, 1.5))],
    "__array_function__": [works(lambda a: np.concatenate([a, 2.0 * a]))],
    # conversions: the policies of API.md
    "__array__": [raises(np.asarray, lf.ConversionError, "concrete array")],
    "__bool__": [policy(lambda a: a * bool(a[0, 0] > 0), lf.DataDependentControlFlowError, r"bool\(\)")],
    "__float__": [policy(lambda a: a + np.floor(float(a[0, 0]) * 10), lf.ItemError, "float")],
    "__int__": [policy(lambda a: a + int(a[0, 0] * 10), lf.ItemError, "int")],
    "__complex__": [policy(lambda a: a + np.floor(complex(a[0, 0]).real * 10), lf.ItemError, "complex")],
    "__index__": [
        policy(lambda a: a * [1.0, 2.0, 3.0][ints(a)[0, 0] % 3], lf.ConversionError, "index"),
        like_plain(lambda a: operator.index(a[0:1, 0].reshape(()))),  # a float index: NumPy's TypeError
    ],
    "__format__": [policy(lambda a: a + np.floor(float(format(a[0, 0], ".3f")) * 10), lf.ItemError, "format")],
    "item": [policy(lambda a: a + np.floor(a.item(5) * 10), lf.ItemError, "item")],
    "tolist": [policy(lambda a: a + np.floor(np.array(a.tolist()) * 10), lf.ItemError, "tolist")],
    "__contains__": [policy(lambda a: a + (a[0, 1] in a), lf.DataDependentControlFlowError, r"bool\(\)")],
    "__round__": [
        works(lambda a: round(a[0, 1], 1) * a),  # a 0-d value stands for a NumPy scalar
        policy(lambda a: a + round(a[0, 1] * 10), lf.ItemError, "round"),  # round(scalar) is an int
        like_plain(lambda a: round(a, 1)),  # NumPy 2's arrays define no __round__
    ],
    # bytes, files and pickles: concrete values
    "tobytes": [raises(lambda a: a.tobytes(), lf.ConversionError, r"ndarray\.tobytes")],
    "tofile": [raises(lambda a: a.tofile(io.BytesIO()), lf.ConversionError, r"ndarray\.tofile")],
    "dump": [raises(lambda a: a.dump(io.BytesIO()), lf.ConversionError, r"ndarray\.dump")],
    "dumps": [raises(lambda a: a.dumps(), lf.ConversionError, r"ndarray\.dumps")],
    "__reduce__": [raises(lambda a: pickle.dumps(a), lf.ConversionError, "pickle")],
    "__reduce_ex__": [raises(lambda a: pickle.dumps(a, protocol=2), lf.ConversionError, "pickle")],
    # memory: a traced value has values, not memory
    "byteswap": [raises(lambda a: a.byteswap(), lf.UnsupportedOperationError, r"ndarray\.byteswap")],
    "getfield": [raises(lambda a: a.getfield(np.float32), lf.UnsupportedOperationError, r"ndarray\.getfield")],
    "setfield": [raises(lambda a: a.setfield(1.0, np.float64), lf.UnsupportedOperationError, r"ndarray\.setfield")],
    "setflags": [raises(lambda a: a.setflags(write=False), lf.UnsupportedOperationError, r"ndarray\.setflags")],
    "resize": [raises(lambda a: a.resize((4, 3)), lf.UnsupportedOperationError, r"ndarray\.resize.*np\.resize")],
    "view": [works(lambda a: a.view() * 2.0),
             raises(lambda a: a.view(np.int64), lf.UnsupportedOperationError, r"ndarray\.view")],
    # indexing and writing
    "__getitem__": [works(lambda a: a[1:, ::2]), works(lambda a: a[[2, 0], 1])],
    "__setitem__": [works(in_place(lambda b: b.__setitem__((0, slice(None, 3)), b[1, 1:] * 2.0)))],
    "__delitem__": [like_plain(lambda a: a.__delitem__(0))],
    "flat": [works(lambda a: a.flat[5] * a), works(lambda a: a.flat[2:7]), works(_written_flat),
             works(lambda a: np.stack(list(a[:2, :2].flat))), works(lambda a: a.flat.copy() * len(a.flat))],
    "put": [works(in_place(lambda b: b.put([0, 5], b[1, :2] * 2.0)))],
    "fill": [works(lambda a: in_place(lambda b: b.fill(2.5))(a) * a)],
    "take": [works(lambda a: a.take([4, 0, 0]))],
    "choose": [works(lambda a: (ints(a) % 2).choose([X, -X]) * a)],
    "compress": [works(lambda a: a.compress([True, False, True], axis=0))],
    "nonzero": [raises(lambda a: a[a.nonzero()], lf.DynamicShapeError, "nonzero", ("vmap", "jit"))],
    "searchsorted": [works(lambda a: np.sort(a, axis=None).searchsorted(0.25) * a)],
    # shapes
    "reshape": [works(lambda a: a.reshape(2, 6)), works(lambda a: a.reshape((-1,)))],
    "ravel": [works(lambda a: a.ravel())],
    "flatten": [works(lambda a: a.flatten())],
    "squeeze": [works(lambda a: a[None].squeeze(0))],
    "swapaxes": [works(lambda a: a.swapaxes(0, 1))],
    "transpose": [works(lambda a: a.transpose()), works(lambda a: a.transpose(1, 0))],
    "repeat": [works(lambda a: a.repeat(2, axis=1))],
    "diagonal": [works(lambda a: a.diagonal(1))],
    "trace": [works(lambda a: a.trace())],
    "copy": [works(lambda a: a.copy())],
    "astype": [works(lambda a: a.astype(np.float32)), works(lambda a: a.astype(np.int64))],
    # reductions and scans
    "sum": [works(lambda a: a.sum(axis=1))],
    "prod": [works(lambda a: a.prod(axis=0))],
    "mean": [works(lambda a: a.mean())],
    "var": [works(lambda a: a.var(axis=1, ddof=1))],
    "std": [works(lambda a: a.std(axis=0))],
    "max": [works(lambda a: a.max(axis=1))],
    "min": [works(lambda a: a.min(axis=0, keepdims=True))],
    "argmax": [works(lambda a: a.argmax(axis=1))],
    "argmin": [works(lambda a: a.argmin())],
    "all": [works(lambda a: (a > 0).all(axis=1))],
    "any": [works(lambda a: (a > 1).any(axis=0))],
    "cumsum": [works(lambda a: a.cumsum(axis=1))],
    "cumprod": [works(lambda a: a.cumprod(axis=0))],
    "sort": [works(in_place(lambda b: b.sort(axis=1)))],
    "argsort": [works(lambda a: a.argsort(axis=1))],
    "partition": [works(in_place(lambda b: b.partition(1, axis=1)))],
    "argpartition": [works(lambda a: a.argpartition(1, axis=1))],
    # elementwise methods
    "round": [works(lambda a: a.round(1))],
    "clip": [works(lambda a: a.clip(-0.8, 1.2))],
    "conj": [works(lambda a: (a + 1j * a * a).conj())],
    "conjugate": [works(lambda a: (a - 0.5j * a).conjugate())],
    "dot": [works(lambda a: a.dot(a.T))],
    # operators
    "__abs__": [works(abs)],
    "__neg__": [works(operator.neg)],
    "__pos__": [works(operator.pos)],
    "__invert__": [works(lambda a: ~ints(a)), works(lambda a: ~(a > 0))],
    "__add__": [works(lambda a: a + 1.5)],
    "__radd__": [works(lambda a: 1.5 + a)],
    "__sub__": [works(lambda a: a - a[0])],
    "__rsub__": [works(lambda a: 2.0 - a)],
    "__mul__": [works(lambda a: a * a)],
    "__rmul__": [works(lambda a: 3.0 * a)],
    "__truediv__": [works(lambda a: a / 1.5)],
    "__rtruediv__": [works(lambda a: 1.0 / a)],
    "__floordiv__": [works(lambda a: a // 0.7)],
    "__rfloordiv__": [works(lambda a: 3.0 // a)],
    "__mod__": [works(lambda a: a % 0.7)],
    "__rmod__": [works(lambda a: 3.0 % a)],
    "__divmod__": [works(lambda a: divmod(a, 4.0)), works(lambda a: divmod(a, [1.5, 2.5, 3.5, 4.5]))],
    "__rdivmod__": [works(lambda a: divmod(4.0, a))],
    "__pow__": [works(lambda a: a ** 2), works(lambda a: abs(a) ** a)],
    "__rpow__": [works(lambda a: 2.0 ** a)],
    "__matmul__": [works(lambda a: a @ a.T)],
    "__rmatmul__": [works(lambda a: [[1.0, -2.0, 0.5]] @ a)],
    "__and__": [works(lambda a: ints(a) & 3), works(lambda a: (a > 0) & (a < 1))],
    "__rand__": [works(lambda a: 6 & ints(a))],
    "__or__": [works(lambda a: ints(a) | 4)],
    "__ror__": [works(lambda a: 1 | ints(a))],
    "__xor__": [works(lambda a: ints(a) ^ 5)],
    "__rxor__": [works(lambda a: 5 ^ ints(a))],
    "__lshift__": [works(lambda a: ints(a) << 2), like_plain(lambda a: a << 2)],  # floats: NumPy's TypeError
    "__rlshift__": [works(lambda a: 3 << (ints(a) % 4))],
    "__rshift__": [works(lambda a: ints(a) >> 1), like_plain(lambda a: a >> 1)],
    "__rrshift__": [works(lambda a: 64 >> (ints(a) % 4))],
    "__eq__": [works(lambda a: a == a[0])],
    "__ne__": [works(lambda a: a != a[:, :1])],
    "__lt__": [works(lambda a: a < 0.5)],
    "__le__": [works(lambda a: a <= a.T[:3, :1])],
    "__gt__": [works(lambda a: a > 0)],
    "__ge__": [works(lambda a: a >= -0.25)],
    # in place
    "__iadd__": [works(_inplace_binary(operator.iadd, lambda a: a.copy(), X))],
    "__isub__": [works(_inplace_binary(operator.isub, lambda a: a * 2.0, 1.5))],
    "__imul__": [works(_inplace_binary(operator.imul, lambda a: a.copy(), X2))],
    "__itruediv__": [works(_inplace_binary(operator.itruediv, lambda a: a * a, 4.0))],
    "__ifloordiv__": [works(_inplace_binary(operator.ifloordiv, lambda a: a.copy(), 0.7))],
    "__imod__": [works(_inplace_binary(operator.imod, lambda a: a.copy(), 0.7))],
    "__ipow__": [works(_inplace_binary(operator.ipow, lambda a: a.copy(), 3))],
    "__imatmul__": [works(_inplace_binary(operator.imatmul, lambda a: a[:, :3].copy(), X[:, :3]))],
    "__iand__": [works(_inplace_binary(operator.iand, ints, 3))],
    "__ior__": [works(_inplace_binary(operator.ior, ints, 4))],
    "__ixor__": [works(_inplace_binary(operator.ixor, ints, 5))],
    "__ilshift__": [works(_inplace_binary(operator.ilshift, ints, 2))],
    "__irshift__": [works(_inplace_binary(operator.irshift, ints, 1))],
}


# --------------------------------------------------------------------- the walk
def test_the_ndarray_walk_leaves_no_member_out():
    tables = {"NDARRAY": set(NDARRAY), "NDARRAY_ABSENT": set(NDARRAY_ABSENT), "NDARRAY_PLUMBING": NDARRAY_PLUMBING}
    members = set(dir(np.ndarray))
    # a 0-d traced value also stands for a NumPy scalar: round(x[0, 0], 1) (NumPy 2's arrays have no __round__)
    scalar_only = set(NDARRAY) & (set(dir(np.float64)) - members)
    for name, table in tables.items():
        gone = table - members - scalar_only
        assert not gone, f"{name} lists names np.ndarray no longer has: {sorted(gone)}"
    listed = [name for table in tables.values() for name in table]
    assert len(listed) == len(set(listed)), "a name is in two tables"
    assert not members - set(listed), (
        f"members of np.ndarray in no table (give each a call under every transform, or a reason): "
        f"{sorted(members - set(listed))}")


@pytest.mark.parametrize("name", sorted(NDARRAY_ABSENT))
def test_absent_on_purpose(name):
    """Absent for ``hasattr`` and for ``inspect.getattr_static`` (runtime Protocols on
    Python 3.12), on every tracer class."""
    import inspect

    from labeled_func.engine.batching import BatchTracer
    from labeled_func.engine.compiler import JitTracer
    from labeled_func.engine.forward import JVPTracer
    from labeled_func.engine.reverse import VJPTracer
    from labeled_func.engine.tracer import Tracer

    for tracer in (Tracer, BatchTracer, JVPTracer, VJPTracer, JitTracer):
        with pytest.raises(AttributeError):
            inspect.getattr_static(tracer, name)
    seen = []
    lf.vmap(lambda a: seen.append(hasattr(a, name)) or a, in_dims=0)(BATCH)
    assert seen == [False]


# --------------------------------------------------------------------- checking one case
def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
    if isinstance(tree, xr.Dataset):
        return [tree[name] for name in sorted(tree.data_vars)]
    return [tree]


def _floating(leaf):
    dtype = getattr(leaf, "dtype", None)
    return np.dtype(np.asarray(leaf).dtype if dtype is None else dtype).kind in "fc"


def _weights(shape):
    size = int(np.prod(shape))
    return np.cos(1.0 + np.arange(size)).reshape(shape)


def _loss(out, anchor):
    """A fixed linear function of the floating outputs (real parts), plus 0 x ``anchor``
    (so that grad sees a function of its input when no output is floating)."""
    total = 0.0 * anchor.sum()
    for leaf in _leaves(out):
        if not _floating(leaf):
            continue
        value = np.real(leaf)
        if isinstance(value, xr.DataArray):
            value = value.fillna(0.0)
            total = total + (value * _weights(value.shape)).sum()
        else:
            total = total + np.sum(value * _weights(np.shape(value)))
    return total


def _assert_close(result, expected, rtol=1e-9, atol=1e-12):
    res, exp = _leaves(result), _leaves(expected)
    assert len(res) == len(exp), f"{len(res)} outputs, expected {len(exp)}"
    for r, e in zip(res, exp):
        if isinstance(e, xr.DataArray):
            assert isinstance(r, xr.DataArray), f"expected a DataArray, got {type(r)}"
            assert r.dims == e.dims, f"dims {r.dims} != {e.dims}"
            assert r.dtype == e.dtype, f"dtype {r.dtype} != {e.dtype}"
            assert (r.name, r.attrs) == (e.name, e.attrs), f"name/attrs {(r.name, r.attrs)} != {(e.name, e.attrs)}"
            xr.testing.assert_allclose(r, e, rtol=rtol, atol=atol)
            continue
        r_array, e_array = np.asarray(r), np.asarray(e)
        assert r_array.shape == e_array.shape, f"shape {r_array.shape} != {e_array.shape}"
        assert r_array.dtype == e_array.dtype, f"dtype {r_array.dtype} != {e_array.dtype}"
        np.testing.assert_allclose(r_array, e_array, rtol=rtol, atol=atol, equal_nan=True)


def _stacked(outs):
    first = outs[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stacked([out[k] for out in outs]) for k in range(len(first)))
    return np.stack([np.asarray(out) for out in outs])


def _central(call, x, direction):
    """``call`` at ``x +- h direction``, and ``h`` and the tolerance of the finite differences:
    single-precision outputs take a larger step (their rounding over 1e-6 is noise)."""
    single = any(_floating(leaf) and np.dtype(getattr(leaf, "dtype", float)).itemsize < 8 * (
        1 + (np.dtype(getattr(leaf, "dtype", float)).kind == "c")) for leaf in _leaves(call(x)))
    h, tolerance = (1e-3, 1e-3) if single else (H, 1e-6)
    return call(x + h * direction), call(x - h * direction), h, tolerance


def _check(case, transform, plain_argument, run, same_message):
    """``case`` under ``transform``: the plain call's own error (type and message: ``same_message``
    compares them), the documented error, or the transform's result against its oracle (``run``)."""
    call = case.call
    if case.like_plain:
        with pytest.raises(Exception) as plain:
            call(plain_argument)
        with pytest.raises(type(plain.value)) as traced:
            run(call, transform)
        assert type(traced.value) is type(plain.value)
        assert same_message(str(traced.value), str(plain.value)), (str(traced.value), str(plain.value))
        assert "Tracer" not in str(traced.value)
        return
    if transform in case.raises:
        error, match = case.raises[transform]
        with pytest.raises(error, match=match):
            run(call, transform)
        return
    run(call, transform, check=True)


def _check_ndarray(case, transform):
    _check(case, transform, X, _run_ndarray, str.startswith)


def _run(call, transform, check, argument, later, direction, vmapped):
    """``call`` under ``transform`` (``vmapped(call, check)``: its vmap, against the loop),
    checked against its oracle where ``check``: the plain call, central differences."""
    if transform == "vmap":
        vmapped(call, check)
    elif transform == "jit":
        jitted = lf.jit(call)
        first = jitted(argument)
        second = jitted(later)
        if check:
            _assert_close(first, call(argument))
            _assert_close(second, call(later))
    elif transform == "grad":
        gradient, aux = lf.grad(lambda a: (_loss(call(a), a), call(a)), has_aux=True)(argument)
        if check:
            _assert_close(aux, call(argument))
            if isinstance(argument, xr.DataArray):
                assert gradient.dims == argument.dims and gradient.name == argument.name
            plus, minus, h, tolerance = _central(call, argument, direction)
            slope = (_loss(plus, argument) - _loss(minus, argument)) / (2 * h)
            np.testing.assert_allclose(float(np.sum(gradient * direction)), float(slope),
                                       rtol=tolerance, atol=tolerance)
    else:
        out, tangent = lf.jvp(call, (argument,), (direction,))
        if check:
            _assert_close(out, call(argument))
            plus, minus, h, tolerance = _central(call, argument, direction)
            for t, p, m, o in zip(_leaves(tangent), _leaves(plus), _leaves(minus), _leaves(out)):
                t_values = np.asarray(getattr(t, "values", t))
                if _floating(o):
                    expected = (np.asarray(getattr(p, "values", p)) - np.asarray(getattr(m, "values", m))) / (2 * h)
                    nan = np.isnan(expected)  # constant NaNs (shift, where): a tangent of NaN or 0
                    assert np.all(np.isnan(t_values[nan]) | (t_values[nan] == 0))
                    np.testing.assert_allclose(t_values[~nan], expected[~nan], rtol=tolerance, atol=tolerance)
                elif t is not None:
                    assert not np.any(t_values), "a tangent of an integer or boolean output"


def _run_ndarray(call, transform, check=False):
    def vmapped(call, check):
        out = lf.vmap(call, in_dims=0)(BATCH)
        if check:
            _assert_close(out, _stacked([call(x) for x in BATCH]))

    _run(call, transform, check, X, X2, DIRECTION, vmapped)


def _params(table):
    out = []
    for name, cases in sorted(table.items()):
        for k, case in enumerate(cases):
            for transform in TRANSFORMS:
                marks = [pytest.mark.xfail(strict=True, reason=case.known_failure)] if case.known_failure else []
                out.append(pytest.param(case, transform, id=f"{name}-{k}-{transform}", marks=marks))
    return out


@pytest.mark.parametrize("case, transform", _params(NDARRAY))
def test_ndarray_member(case, transform):
    _check_ndarray(case, transform)


# --------------------------------------------------------------------- DataArray
T = np.array([0.0, 0.1, 0.3, 0.6])
COORDS = {"x": ["a", "b", "c"], "t": ("t", T, {"units": "s"}), "lon": ("x", [1.5, 2.5, 3.5])}


def _field(values):
    return xr.DataArray(values, dims=("x", "t"), coords=COORDS, name="field", attrs={"units": "m"})


D, D2 = _field(X), _field(X2)
DIRECTION_D = _field(DIRECTION)
D_BATCH = xr.concat([D, D2], dim=xr.DataArray([10, 20], dims="sample", name="sample")).transpose("sample", ...)
OTHER = xr.DataArray(np.cos(np.arange(8.0)).reshape(2, 4), dims=("k", "t"), coords={"t": T})


def _timed(d):
    """``d`` along a daily time axis (resample, .dt, calendars)."""
    return d.rename(t="time").assign_coords(time=np.arange("2001-02-26", "2001-03-02", dtype="datetime64[D]"))


def _stacked_dataset(d):
    return xr.Dataset({"a": d, "b": d * 2.0}).to_stacked_array("z", sample_dims=["x"])


def _loaded_async(d):
    import asyncio

    return asyncio.run(d.load_async()) * 2.0


def _installed(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def optional(module, case):
    """``case`` where ``module`` is installed; else the plain call's ImportError, unchanged."""
    return case if _installed(module) else like_plain(case.call)


# xarray hands rolling, cumulative and fill reductions of NumPy-like data to numbagg's compiled
# gufuncs where numbagg is installed; they have no kernel (UnsupportedOperationError)
NUMBAGG = ("with numbagg installed xarray reduces through numbagg's gufuncs (move_mean...), which have "
           "no kernel: the transforms should run with xr.set_options(use_numbagg=False)")


def unless_numbagg(case):
    return dataclasses.replace(case, known_failure=NUMBAGG) if _installed("numbagg") else case


DATAARRAY_PLUMBING = {
    "__class__", "__delattr__", "__dir__", "__doc__", "__getattribute__", "__getstate__", "__init__",
    "__init_subclass__", "__module__", "__new__", "__setattr__", "__sizeof__", "__slots__", "__subclasshook__",
    "__weakref__", "__annotations__", "__hash__", "__array_priority__",
    # Dask's collection protocol: inside a transform the data are never a Dask array (lf.vmap of
    # Dask-chunked inputs runs one in-memory vmap per block); building one raises (see chunk)
    "__dask_graph__", "__dask_keys__", "__dask_layers__", "__dask_optimize__", "__dask_postcompute__",
    "__dask_postpersist__", "__dask_scheduler__", "__dask_exprs__", "__dask_rebuild_from_exprs__",
    # constructors from other libraries' objects (pandas, iris), which cannot hold a traced value
    "from_series", "from_iris",
}

DATAARRAY: dict[str, list[Case]] = {
    # description
    "dims": [works(lambda d: d.transpose(*d.dims[::-1]))],
    "shape": [works(lambda d: d * d.shape[1])],
    "sizes": [works(lambda d: d * d.sizes["t"])],
    "size": [works(lambda d: d * d.size)],
    "ndim": [works(lambda d: d * d.ndim)],
    "nbytes": [works(lambda d: d * d.nbytes)],
    "dtype": [works(lambda d: d.astype(d.dtype) * 2.0)],
    "name": [works(lambda d: d.rename("other") * len(d.name))],
    "attrs": [works(lambda d: d * len(d.attrs))],
    "encoding": [works(lambda d: d * (len(d.encoding) + 1))],
    "coords": [works(lambda d: d * d.coords["lon"])],
    "indexes": [works(lambda d: d * len(d.indexes))],
    "xindexes": [works(lambda d: d * len(d.xindexes))],
    "chunks": [works(lambda d: d * (d.chunks is None))],
    "chunksizes": [works(lambda d: d * (len(d.chunksizes) + 1))],
    "variable": [works(lambda d: xr.DataArray(d.variable * 2.0))],
    "data": [works(lambda d: d.data * 2.0)],
    "real": [works(lambda d: (d + 2j * d).real)],
    "imag": [works(lambda d: (d - 1j * d * d).imag)],
    "get_axis_num": [works(lambda d: d * d.get_axis_num("t"))],
    "get_index": [works(lambda d: d * len(d.get_index("t")))],
    "__len__": [works(lambda d: d * len(d))],
    "__iter__": [works(lambda d: xr.concat([row * i for i, row in enumerate(d)], "x", coords="different",
                                           compat="equals", join="outer"))],
    "__repr__": [works(lambda d: d * (len(repr(d)) > 0))],
    "__str__": [works(lambda d: d * (len(str(d)) > 0))],
    "__format__": [works(lambda d: d * (len(format(d, "")) > 0)),
                   policy(lambda d: d + np.floor(float(format(d[0, 0], ".3f")) * 10), lf.ItemError, "format")],
    "__getattr__": [works(lambda d: d * d.lon + d.t)],
    "__contains__": [works(lambda d: d * ("t" in d)),  # xarray: `key in d.data` (a name is in no number array)
                     policy(lambda d: d * (d.data[0, 1] in d), lf.DataDependentControlFlowError, r"bool\(\)")],
    "__copy__": [works(lambda d: copy.copy(d) * 2.0)],
    "__deepcopy__": [works(lambda d: copy.deepcopy(d) * 2.0)],
    "copy": [works(lambda d: d.copy() * 2.0), works(lambda d: d.copy(data=d.data * 3.0))],
    "__enter__": [works(lambda d: _entered(d))],
    "__exit__": [works(lambda d: _entered(d))],
    "close": [works(lambda d: (d.close(), d * 2.0)[1])],
    "set_close": [works(lambda d: (d.set_close(None), d * 2.0)[1])],
    "compute": [works(lambda d: d.compute() * 2.0)],
    "load": [works(lambda d: d.load() * 2.0)],
    "load_async": [works(_loaded_async)],
    "persist": [works(lambda d: d.persist() * 2.0)],
    "unify_chunks": [works(lambda d: d.unify_chunks() * 2.0)],
    "pipe": [works(lambda d: d.pipe(np.sin))],
    "from_dict": [works(lambda d: xr.DataArray.from_dict({"dims": d.dims, "data": d.data * 2.0}))],
    # this package's own accessor: a transform inside the transform
    "func": [works(lambda d: d.func.grad(lambda e: (e ** 3).sum()))],
    # conversions, I/O and Dask: the conversion policy
    "__array__": [raises(np.asarray, lf.ConversionError, "concrete array")],
    "values": [raises(lambda d: d.values, lf.ConversionError, "concrete array")],
    "to_numpy": [raises(lambda d: d.to_numpy(), lf.ConversionError, "concrete array")],
    "as_numpy": [raises(lambda d: d.as_numpy(), lf.ConversionError, "concrete array")],
    "to_pandas": [raises(lambda d: d.to_pandas(), lf.ConversionError, "concrete array")],
    "to_series": [raises(lambda d: d.to_series(), lf.ConversionError, "concrete array")],
    "to_dataframe": [raises(lambda d: d.to_dataframe(), lf.ConversionError, "concrete array")],
    "to_dict": [raises(lambda d: d.to_dict(), lf.ConversionError, "concrete array")],
    "to_index": [raises(lambda d: d.isel(x=0).to_index(), lf.ConversionError, "concrete array")],
    "to_masked_array": [raises(lambda d: d.to_masked_array(), lf.ConversionError, "concrete array")],
    # the writer stores the values into plain arrays (InplaceError), or tests a value first (under vmap,
    # the scalar coordinate of the mapped dim: DataDependentControlFlowError): a policy error naming it
    "to_netcdf": [raises(lambda d: d.to_netcdf(), lf.TransformError, "to_netcdf")],
    "to_zarr": [optional("zarr", raises(lambda d: d.to_zarr({}), lf.ConversionError, "concrete array"))],
    "to_iris": [optional("iris", raises(lambda d: d.to_iris(), lf.ConversionError, "concrete array"))],
    "__arrow_c_schema__": [optional("pyarrow", works(lambda d: d * (d.__arrow_c_schema__() is not None)))],  # dtypes only
    "__arrow_c_stream__": [optional("pyarrow", raises(lambda d: d.__arrow_c_stream__(), lf.ConversionError, "concrete"))],
    "to_dask_dataframe": [optional("dask.dataframe", raises(lambda d: d.to_dask_dataframe(), lf.ConversionError,
                                                            "Dask"))],
    "chunk": [raises(lambda d: d.chunk(t=2), lf.ConversionError, "Dask")],
    "__dask_tokenize__": [raises(lambda d: d.__dask_tokenize__(), lf.ConversionError, "Dask")],
    "__reduce__": [raises(lambda d: pickle.dumps(d), lf.ConversionError, "pickle")],
    "__reduce_ex__": [raises(lambda d: pickle.dumps(d, protocol=2), lf.ConversionError, "pickle")],
    "plot": [raises(lambda d: _plotted(d), lf.ConversionError, "concrete array")],
    "__bool__": [policy(lambda d: d * bool(d[0, 0] > 0), lf.DataDependentControlFlowError, r"bool\(\)")],
    "__float__": [policy(lambda d: d + np.floor(float(d[0, 0]) * 10), lf.ItemError, "float")],
    "__int__": [policy(lambda d: d + int(d[0, 0] * 10), lf.ItemError, "int")],
    "__complex__": [policy(lambda d: d + np.floor(complex(d[0, 0]).real * 10), lf.ItemError, "complex")],
    "item": [policy(lambda d: d + np.floor(d.item(5) * 10), lf.ItemError, "item")],
    # indexing and writing
    "__getitem__": [works(lambda d: d[1:, ::2]), works(lambda d: d[{"t": [2, 0]}])],
    "__setitem__": [works(in_place(lambda b: b.__setitem__((0, slice(None, 3)), b[1, 1:].data * 2.0)))],
    "__delitem__": [works(lambda d: _without_coordinate(d))],
    "loc": [works(lambda d: d.loc[["c", "a"], 0.1:0.3])],
    "isel": [works(lambda d: d.isel(t=[0, 2]))],
    "sel": [works(lambda d: d.sel(x="b", t=0.3))],
    "head": [works(lambda d: d.head(t=2))],
    "tail": [works(lambda d: d.tail(x=2))],
    "thin": [works(lambda d: d.thin(t=2))],
    "drop_isel": [works(lambda d: d.drop_isel(t=[1]))],
    "drop_sel": [works(lambda d: d.drop_sel(x=["b"]))],
    "query": [works(lambda d: d.query(t="t > 0.05"))],
    "where": [works(lambda d: d.where(d > 0, -d))],
    "isin": [works(lambda d: d.isin([X[0, 0], X2[0, 0]]))],
    "searchsorted": [works(lambda d: xr.DataArray(np.sort(d.data, axis=None)).searchsorted(0.25) * d)],
    "dropna": [raises(lambda d: d.where(d > -1.2).dropna("t"), lf.DynamicShapeError, "dropna", ("vmap", "jit"))],
    "drop_duplicates": [works(lambda d: d.drop_duplicates("x"))],
    # coordinates, names and indexes
    "assign_coords": [works(lambda d: d.assign_coords(t2=d.t * 2.0))],
    "assign_attrs": [works(lambda d: d.assign_attrs(units="s") * 2.0)],
    "drop_attrs": [works(lambda d: d.drop_attrs())],
    "drop_encoding": [works(lambda d: d.drop_encoding())],
    "reset_encoding": [works(lambda d: d.reset_encoding())],
    "drop_vars": [works(lambda d: d.drop_vars("lon"))],
    "drop": [works(lambda d: d.drop("lon"))],
    "drop_indexes": [works(lambda d: d.drop_indexes("t"))],
    "reset_coords": [works(lambda d: d.reset_coords(drop=True))],
    "reset_index": [works(lambda d: d.reset_index("t"))],
    "set_index": [works(lambda d: d.set_index(x="lon"))],
    "set_xindex": [works(lambda d: d.drop_indexes("t").set_xindex("t"))],
    "reorder_levels": [works(lambda d: d.stack(z=("x", "t")).reorder_levels(z=["t", "x"]))],
    "rename": [works(lambda d: d.rename(t="time"))],
    "swap_dims": [works(lambda d: d.swap_dims(x="lon"))],
    "expand_dims": [works(lambda d: d.expand_dims(k=2))],
    "squeeze": [works(lambda d: d.isel(t=[1]).squeeze("t"))],
    "transpose": [works(lambda d: d.transpose("t", "x"))],
    "T": [works(lambda d: d.T)],
    "stack": [works(lambda d: d.stack(z=("x", "t")))],
    "unstack": [works(lambda d: d.stack(z=("x", "t")).unstack("z"))],
    "to_dataset": [works(lambda d: d.to_dataset(name="v")), works(lambda d: d.to_dataset(dim="x"))],
    "to_unstacked_dataset": [works(lambda d: _stacked_dataset(d).to_unstacked_dataset("z"))],
    "broadcast_like": [works(lambda d: d.broadcast_like(OTHER))],
    "reindex": [works(lambda d: d.reindex(t=[0.0, 0.3, 0.45]))],
    "reindex_like": [works(lambda d: d.reindex_like(OTHER.isel(t=[3, 0])))],
    "sortby": [works(lambda d: d.sortby("lon", ascending=False))],
    "roll": [works(lambda d: d.roll(t=1))],
    "shift": [works(lambda d: d.shift(t=1))],
    "pad": [works(lambda d: d.pad(t=(1, 2), mode="edge"))],
    "combine_first": [works(lambda d: d.where(d > 0).combine_first(d * 2.0))],
    # comparisons of whole arrays
    # (answered per example under vmap; under lf.jit an array and its copies are equal at every
    # call, other arrays would need one answer for every call)
    "equals": [works(lambda d: d * d.equals(d.copy())),
               raises(lambda d: d * d.equals(d + 0.0), lf.DataDependentControlFlowError, "equals", ("jit",))],
    "identical": [works(lambda d: d * d.identical(d.copy())),
                  raises(lambda d: d * d.identical(d + 0.0), lf.DataDependentControlFlowError, "identical",
                         ("jit",))],
    "broadcast_equals": [raises(lambda d: d * d.broadcast_equals(d.T), lf.DataDependentControlFlowError,
                                "broadcast_equals", ("jit",))],
    # reductions, scans and statistics
    "sum": [works(lambda d: d.sum("t"))],
    "prod": [works(lambda d: d.prod("x"))],
    "mean": [works(lambda d: d.mean())],
    "median": [works(lambda d: d.median("t"))],
    "std": [works(lambda d: d.std("x", ddof=1))],
    "var": [works(lambda d: d.var("t"))],
    "max": [works(lambda d: d.max("t"))],
    "min": [works(lambda d: d.min())],
    "all": [works(lambda d: (d > 0).all("t"))],
    "any": [works(lambda d: (d > 1).any())],
    "count": [works(lambda d: d.where(d > 0).count("t"))],
    "argmax": [works(lambda d: d.argmax("t"))],
    "argmin": [works(lambda d: d.argmin("x"))],
    "argsort": [works(lambda d: d.argsort())],
    "idxmax": [works(lambda d: d.idxmax("t"))],  # labels gathered by position (labeled_func.xarray_methods)
    "idxmin": [works(lambda d: d.idxmin("x"))],
    "quantile": [works(lambda d: d.quantile([0.25, 0.5], dim="t"))],
    # bottleneck's and numbagg's compiled loops need concrete arrays (the plain call's ImportError without them)
    "rank": [optional("bottleneck", raises(lambda d: d.rank("t"), lf.ConversionError, "rank"))],
    "cumsum": [works(lambda d: d.cumsum("t"))],
    "cumprod": [works(lambda d: d.cumprod("x"))],
    "cumulative": [unless_numbagg(works(lambda d: d.cumulative("t").sum()))],
    "reduce": [works(lambda d: d.reduce(np.sum, dim="t"))],
    "diff": [works(lambda d: d.diff("t"))],
    "differentiate": [works(lambda d: d.differentiate("t"))],
    "integrate": [works(lambda d: d.integrate("t"))],
    "cumulative_integrate": [works(lambda d: d.cumulative_integrate("t"))],
    "dot": [works(lambda d: d.dot(d, dim="t"))],
    "polyfit": [works(lambda d: d.polyfit("t", 1).polyfit_coefficients),  # skipna: labeled_func.xarray_methods
                works(lambda d: d.polyfit("t", 1, skipna=False).polyfit_coefficients)],
    # grad and jvp: lf.curve_fit; central differences need the exact optimum (with its own
    # finite-difference Jacobian SciPy's optimum is off by ~1e-8, as much as a step moves it)
    "curvefit": [works(lambda d: d.curvefit("t", _line, kwargs=EXACT_LINE_FIT).curvefit_coefficients)],
    # elementwise
    "astype": [works(lambda d: d.astype(np.float32)), works(lambda d: (d * 4).astype(np.int64))],
    "round": [works(lambda d: d.round(1))],
    "clip": [works(lambda d: d.clip(-0.8, 1.2))],
    "conj": [works(lambda d: (d + 1j * d * d).conj())],
    "conjugate": [works(lambda d: (d - 0.5j * d).conjugate())],
    "isnull": [works(lambda d: d.where(d > 0).isnull())],
    "notnull": [works(lambda d: d.where(d > 0).notnull())],
    "fillna": [works(lambda d: d.where(d > 0).fillna(0.5))],
    "ffill": [unless_numbagg(optional("bottleneck", raises(lambda d: d.where(d > 0).ffill("t"), lf.ConversionError,
                                                           "ffill")))],
    "bfill": [unless_numbagg(optional("bottleneck", raises(lambda d: d.where(d > 0).bfill("t"), lf.ConversionError,
                                                           "bfill")))],
    # pandas' gap finder gets the primal's NaN mask under grad and jvp (a mask has no derivative);
    # interp's linear and nearest methods go through the interp primitive
    # (labeled_func/xarray_interp.py), the others refuse; interpolate_na's nearest goes through SciPy
    "interpolate_na": [works(lambda d: d.where(d > -1.2).interpolate_na("t")),
                       raises(lambda d: d.where(d > -1.2).interpolate_na("t", method="nearest"), lf.ConversionError,
                              "interp1d", ("grad", "jvp"))],
    "interp": [works(lambda d: d.interp(t=[0.05, 0.2, 0.5])),
               works(lambda d: d.interp(t=[0.05, 0.2, 0.5, 0.9], method="nearest")),
               works(lambda d: d.interp(t=[0.05, 0.2, 0.5], method="cubic")),
               raises(lambda d: d.interp(t=[0.05, 0.2], method="quadratic"), lf.UnsupportedOperationError,
                      "method='quadratic'")],
    "interp_like": [works(lambda d: d.interp_like(OTHER.assign_coords(t=T / 2)))],
    # groups and windows
    "groupby": [works(lambda d: d.assign_coords(g=("x", [0, 1, 0])).groupby("g").mean())],
    "groupby_bins": [works(lambda d: d.groupby_bins("t", [0.0, 0.2, 1.0]).sum())],
    "rolling": [unless_numbagg(works(lambda d: d.rolling(t=2).mean()))],
    "rolling_exp": [optional("numbagg", raises(lambda d: d.rolling_exp(t=2).mean(), lf.UnsupportedOperationError,
                                               "move_exp_nanmean"))],
    "coarsen": [works(lambda d: d.coarsen(t=2).mean())],
    "weighted": [works(lambda d: d.weighted(d.t + 1.0).mean("t"))],
    "resample": [works(lambda d: _timed(d).resample(time="2D").mean())],
    "map_blocks": [works(lambda d: d.map_blocks(np.sin))],
    # time and strings
    "dt": [works(lambda d: d * _timed(d).time.dt.day.values), like_plain(lambda d: d.dt)],
    "convert_calendar": [optional("cftime", works(lambda d: _timed(d).convert_calendar("noleap")))],
    "interp_calendar": [works(lambda d: _timed(d).interp_calendar(_timed(d).time))],
    "str": [like_plain(lambda d: d.str.upper())],
    # operators
    "__abs__": [works(abs)],
    "__neg__": [works(operator.neg)],
    "__pos__": [works(operator.pos)],
    "__invert__": [works(lambda d: ~(d > 0)), works(lambda d: ~ints(d))],
    "__add__": [works(lambda d: d + 1.5), works(lambda d: d + OTHER)],
    "__radd__": [works(lambda d: 1.5 + d)],
    "__sub__": [works(lambda d: d - d.isel(x=0))],
    "__rsub__": [works(lambda d: 2.0 - d)],
    "__mul__": [works(lambda d: d * d)],
    "__rmul__": [works(lambda d: 3.0 * d)],
    "__truediv__": [works(lambda d: d / 1.5)],
    "__rtruediv__": [works(lambda d: 1.0 / d)],
    "__floordiv__": [works(lambda d: d // 0.7)],
    "__rfloordiv__": [works(lambda d: 3.0 // d)],
    "__mod__": [works(lambda d: d % 0.7)],
    "__rmod__": [works(lambda d: 3.0 % d)],
    "__pow__": [works(lambda d: d ** 2)],
    "__rpow__": [works(lambda d: 2.0 ** d)],
    "__matmul__": [works(lambda d: d @ d)],
    "__rmatmul__": [works(lambda d: xr.Variable(("k", "x"), OTHER.data[:, :3]) @ d)],
    "__and__": [works(lambda d: ints(d) & 3), works(lambda d: (d > 0) & (d < 1))],
    "__rand__": [works(lambda d: 6 & ints(d))],
    "__or__": [works(lambda d: ints(d) | 4)],
    "__ror__": [works(lambda d: 1 | ints(d))],
    "__xor__": [works(lambda d: ints(d) ^ 5)],
    "__rxor__": [works(lambda d: 5 ^ ints(d))],
    "__lshift__": [works(lambda d: ints(d) << 2)],
    "__rshift__": [works(lambda d: ints(d) >> 1)],
    "__eq__": [works(lambda d: d == d.isel(x=0))],
    "__ne__": [works(lambda d: d != 0.5)],
    "__lt__": [works(lambda d: d < 0.5)],
    "__le__": [works(lambda d: d <= d.T)],
    "__gt__": [works(lambda d: d > 0)],
    "__ge__": [works(lambda d: d >= -0.25)],
    "__array_ufunc__": [works(lambda d: np.add(d, 1.5))],
    "__array_wrap__": [works(lambda d: d.__array_wrap__(d.data * 2.0))],
    # labeled_func.xarray_numpy: NumPy functions xarray does not wrap, on the DataArray's data
    "__array_function__": [works(lambda d: np.fft.ifftshift(d, axes=1)), works(lambda d: np.swapaxes(d, 0, 0)),
                           works(lambda d: np.flip(d, axis=1))],
    "__iadd__": [works(_inplace_binary(operator.iadd, lambda d: d.copy(), D))],
    "__isub__": [works(_inplace_binary(operator.isub, lambda d: d * 2.0, 1.5))],
    "__imul__": [works(_inplace_binary(operator.imul, lambda d: d.copy(), D2))],
    "__itruediv__": [works(_inplace_binary(operator.itruediv, lambda d: d * d, 4.0))],
    "__ifloordiv__": [works(_inplace_binary(operator.ifloordiv, lambda d: d.copy(), 0.7))],
    "__imod__": [works(_inplace_binary(operator.imod, lambda d: d.copy(), 0.7))],
    "__ipow__": [works(_inplace_binary(operator.ipow, lambda d: d.copy(), 3))],
    "__iand__": [works(_inplace_binary(operator.iand, ints, 3))],
    "__ior__": [works(_inplace_binary(operator.ior, ints, 4))],
    "__ixor__": [works(_inplace_binary(operator.ixor, ints, 5))],
    "__ilshift__": [works(_inplace_binary(operator.ilshift, ints, 2))],
    "__irshift__": [works(_inplace_binary(operator.irshift, ints, 1))],
}

# operators ndarray has and DataArray does not: xarray refuses them, and so does a transform, alike
DATAARRAY_REFUSED = {
    "__divmod__": [like_plain(lambda d: divmod(d, 4.0))],
    "__rdivmod__": [like_plain(lambda d: divmod(4.0, d))],
    "__round__": [like_plain(lambda d: round(d, 1)), like_plain(lambda d: round(d))],
    "__rlshift__": [like_plain(lambda d: 1 << ints(d))],
    "__rrshift__": [like_plain(lambda d: 64 >> ints(d))],
}


def _line(t, a, b):
    return a * t + b


EXACT_LINE_FIT = {"jac": lambda t, a, b: np.stack([t, np.ones_like(t)], axis=-1),
                  "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}


def _entered(d):
    with d as inside:
        return inside * 2.0


def _without_coordinate(d):
    d = d.copy()
    del d["lon"]
    return d * 2.0


def _plotted(d):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        d.plot()
    finally:
        plt.close("all")
    return d


def _dataarray_members():
    """Public names and dunders (private helpers, ``_name``, are not members one calls; nor is
    ``__slotnames__``, copyreg's cache, set on the class once anything copied or pickled one;
    nor an accessor another library registers when it is imported, as pint-xarray's ``.pint``:
    the set must not depend on what ran before in the process)."""
    return {name for name in dir(xr.DataArray) if (not name.startswith("_") or
            (name.startswith("__") and name.endswith("__"))) and name != "__slotnames__"
            and not _foreign_accessor(name)}


def _foreign_accessor(name):
    found = inspect.getattr_static(xr.DataArray, name, None)
    accessor = getattr(found, "_accessor", None)  # xarray's registration wraps the accessor class
    return isinstance(accessor, type) and not accessor.__module__.startswith(("labeled_func", "xarray"))


def test_the_dataarray_walk_leaves_no_member_out():
    tables = {"DATAARRAY": set(DATAARRAY), "DATAARRAY_PLUMBING": DATAARRAY_PLUMBING}
    members = _dataarray_members()
    for name, table in tables.items():
        assert not table - members, f"{name} lists names xr.DataArray no longer has: {sorted(table - members)}"
    assert not set(DATAARRAY) & DATAARRAY_PLUMBING, "a name is in two tables"
    missing = members - set(DATAARRAY) - DATAARRAY_PLUMBING
    assert not missing, (f"members of xr.DataArray in no table (give each a call under every transform, "
                         f"or a reason): {sorted(missing)}")
    assert not set(DATAARRAY_REFUSED) & members, "an operator DataArray now defines: move it to DATAARRAY"
    assert set(DATAARRAY_REFUSED) <= set(dir(np.ndarray)) | {"__round__"}


def _check_dataarray(case, transform):
    _check(case, transform, D, _run_dataarray, str.__eq__)


def _run_dataarray(call, transform, check=False):
    def vmapped(call, check):
        out = lf.vmap(call, dim="sample")(D_BATCH)
        if check:
            assert_same(out, loop_vmap(call, "sample", D_BATCH))

    _run(call, transform, check, D, D2, DIRECTION_D, vmapped)


@pytest.mark.parametrize("case, transform", _params(DATAARRAY) + _params(DATAARRAY_REFUSED))
def test_dataarray_member(case, transform):
    _check_dataarray(case, transform)


# --------------------------------------------------------------------- np.vectorize with signatures
def _weighted_norm(v, scale):
    return np.sqrt((v * v).sum()) * scale if scale > 0 else (v * scale).sum()


def _seven(a, b, c, d, e, f, v):  # curvefit's shape: scalars and one core block in, a block out
    return np.stack([(v * a).sum() + b * c, d * e - f * v.max()])


SIGNATURES = [
    # (signature, pyfunc, argument shapes (None: a number), whether the last output is differentiable)
    ("(n),()->()", _weighted_norm, [(3, 4), (3,)]),
    ("(n),()->()", _weighted_norm, [(4,), None]),
    (" ( n ) , ( ) -> ( ) ", _weighted_norm, [(2, 3, 4), (1, 3)]),
    ("()->()", lambda v: v ** 3 if v > 0 else np.sin(v), [(3, 4)]),
    ("(),()->(),()", lambda v, w: (v * w, v - w * w), [(3, 4), (4,)]),
    ("(n)->(n)", lambda v: np.cumsum(v * v[::-1]), [(3, 4)]),
    ("(m,n),(n)->(m)", lambda m, v: m @ v, [(2, 3, 4), (4,)]),
    ("(n),(n)->()", lambda v, w: (v * w).sum(), [(3, 4), (3, 4)]),
    ("(),(),(),(),(),(),(n)->(k)", _seven, [(3,), None, (3,), None, None, (1,), (3, 4)]),
    ("()->(k_2)", lambda v: np.stack([v, v * v]), [(4,)]),
]


def _signature_arguments(shapes, x):
    """Arguments of ``shapes`` filled from ``x`` (so that they are functions of one input)."""
    flat, out, start = x.reshape(-1), [], 0
    for k, shape in enumerate(shapes):
        size = 1 if shape is None else int(np.prod(shape))
        part = flat[start:start + size] if size <= flat.size - start else flat[:size]
        start += size
        out.append(part.reshape(()) * (k + 1) if shape is None else part.reshape(shape))
    return out


def _signature_input(shapes):
    size = sum(1 if shape is None else int(np.prod(shape)) for shape in shapes)
    return np.abs(_signed((size,))) + 0.1 * np.arange(size)


@pytest.mark.parametrize("signature, pyfunc, shapes", SIGNATURES, ids=[s[0].replace(" ", "") for s in SIGNATURES])
def test_vectorize_with_a_signature_matches_numpy(signature, pyfunc, shapes):
    """Values under grad, jvp, vmap and jit equal NumPy's own vectorize; derivatives equal
    central differences of it."""
    vectorized = np.vectorize(pyfunc, signature=signature)
    x = _signature_input(shapes)

    def call(x):
        return vectorized(*_signature_arguments(shapes, x))

    expected = call(x)  # NumPy's own (no traced argument)
    direction = RNG.normal(size=x.shape)
    plus, minus = call(x + H * direction), call(x - H * direction)
    out, tangent = lf.jvp(call, (x,), (direction,))
    _assert_close(out, expected)
    for t, p, m in zip(_leaves(tangent), _leaves(plus), _leaves(minus)):
        np.testing.assert_allclose(t, (p - m) / (2 * H), rtol=1e-6, atol=1e-6)
    gradient, aux = lf.grad(lambda x: (_loss(call(x), x), call(x)), has_aux=True)(x)
    _assert_close(aux, expected)
    np.testing.assert_allclose(np.sum(gradient * direction), (_loss(plus, x) - _loss(minus, x)) / (2 * H),
                               rtol=1e-6, atol=1e-6)
    batch = np.stack([x, x[::-1]])
    _assert_close(lf.vmap(call, in_dims=0)(batch), _stacked([call(b) for b in batch]))
    jitted = lf.jit(call)
    _assert_close(jitted(x), expected)
    _assert_close(jitted(x[::-1].copy()), call(x[::-1].copy()))


@pytest.mark.parametrize("signature", [
    "(n),()->()", "()->()", "(m,n),(n,p)->(m,p)", " ( n ) , ( ) -> ( ) , (k)", "(),(),(),(),(),(),(n)->(3)",
    "(a_1,b2),()->()", "(n)->", "->()", "(n)(m)->()", "(n,)->()", "((n))->()", "(n)->();", "(a-b)->()",
    "(n?,k),(k,m?)->(n?,m?)", "(n)->()->()", "(n),->()", "", "()",
])
def test_the_signature_parser_follows_numpy(signature):
    from labeled_func.engine.numpy.functional import gufunc_signature

    try:
        vectorized = np.vectorize(np.sum, signature=signature)
    except ValueError as error:
        with pytest.raises(ValueError) as ours:
            gufunc_signature(signature)
        assert str(ours.value) == str(error)
        return
    inputs, outputs = gufunc_signature(signature)
    numpy_cores = getattr(vectorized, "_in_and_out_core_dims", None)  # NumPy's parse, where it keeps it
    if numpy_cores is not None:
        assert [list(inputs), list(outputs)] == [list(part) for part in numpy_cores]
    else:  # the count of arguments NumPy checks at each call
        assert len(inputs) == signature.split("->")[0].count("(")


@pytest.mark.parametrize("call", [
    lambda v, x: v(x),  # one argument where the signature has two
    lambda v, x: v(x, x[:2], x),  # three
    lambda v, x: v(x, x[:, :2]),  # core dim n of two sizes
    lambda v, x: v(x.reshape(-1)[0], x),  # a 0-d argument for a core dim
], ids=["too-few", "too-many", "inconsistent-core", "not-enough-dims"])
def test_vectorize_signature_errors_are_numpys(call):
    vectorized = np.vectorize(lambda v, w: (v * w).sum(), signature="(n),(n)->()")
    with pytest.raises(Exception) as plain:
        call(vectorized, X)
    for transform in ("grad", "jvp"):
        with pytest.raises(type(plain.value)) as traced:
            if transform == "grad":
                lf.grad(lambda x: call(vectorized, x).sum())(X)
            else:
                lf.jvp(lambda x: call(vectorized, x), (X,), (DIRECTION,))
        assert str(traced.value) == str(plain.value)


def test_vectorize_wrong_number_of_outputs_is_numpys_error():
    vectorized = np.vectorize(lambda v: (v, v), signature="()->()")
    with pytest.raises(ValueError) as plain:
        vectorized(X)
    with pytest.raises(ValueError) as traced:
        lf.grad(lambda x: vectorized(x).sum())(X)
    assert str(traced.value) == str(plain.value) == "wrong number of outputs from pyfunc: expected 1, got 2"


def test_a_missing_attribute_in_a_vectorized_function_names_numpys_element_type():
    """NumPy passes Python numbers (otypes given), NumPy scalars or arrays: the error says which."""
    for vectorized in (np.vectorize(lambda v: v.upper()), np.vectorize(lambda v: v.upper(), otypes=[float]),
                       np.vectorize(lambda v: v.upper(), signature="(n)->()")):
        with pytest.raises(AttributeError) as plain:
            vectorized(X)
        with pytest.raises(AttributeError) as traced:
            lf.grad(lambda x: vectorized(x).sum())(X)
        assert str(traced.value) == str(plain.value)


def test_curvefit_under_vmap_jit_and_grad():
    """DataArray.curvefit runs np.vectorize with the signature "(),(),...,(n)->(k),(k,k)": under
    vmap and jit NumPy's vectorize and SciPy run on each example's values (the table compares them
    with the loop); under grad and jvp SciPy's fit goes through lf.curve_fit (implicit derivative),
    checked against central differences of a converged fit."""
    t = np.linspace(0.0, 1.0, 9)
    data = xr.DataArray(2.0 * np.exp(-1.5 * t) + 0.01 * np.sin(9.0 * t), dims="t", coords={"t": t})
    batch = xr.concat([data, data * 1.5], dim="sample")

    def fitted(y):
        return y.curvefit("t", lambda t, a, b: a * np.exp(-b * t), p0={"a": 1.0, "b": 1.0}).curvefit_coefficients

    assert_same(lf.vmap(fitted, dim="sample")(batch), loop_vmap(fitted, "sample", batch), rtol=1e-6)
    xr.testing.assert_allclose(lf.jit(fitted)(data * 1.5), fitted(data * 1.5))
    def jacobian(t, a, b):  # the exact optimum (SciPy's own finite-difference Jacobian is off by ~1e-8)
        return np.stack([np.exp(-b * t), -a * t * np.exp(-b * t)], axis=-1)

    def converged(y):
        return y.curvefit("t", lambda t, a, b: a * np.exp(-b * t), p0={"a": 1.0, "b": 1.0},
                          kwargs={"jac": jacobian, "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}).curvefit_coefficients

    loss = lambda y: float((converged(y) ** 2).sum())  # noqa: E731
    h = 1e-3  # the optimiser stops within ~1e-11 of the optimum: a larger step keeps that below 1e-7
    central = [(loss(data + step) - loss(data - step)) / (2 * h) for step in np.eye(t.size) * h]
    got = lf.grad(lambda y: (converged(y) ** 2).sum())(data)
    np.testing.assert_allclose(got.values, central, rtol=1e-5, atol=1e-7)
