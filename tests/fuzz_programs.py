"""Random programs for the differential fuzzer of ``lf.jit`` (``tests/test_fuzz_jit.py``).

A *case* is a function ``f(x, y, s, k)`` written as Python source, one line per drawn
operation; a wrapping (``f``, ``lf.vmap(f)``, ``lf.grad(loss)``, ``lf.vmap(lf.grad(loss))``,
``loss`` summing every element of ``f``'s outputs); and the arguments of four calls, as
source too: the trace, a replay (other values, the same signature), a retrace (one part
of the signature changed: a static argument, a Python number, coordinate attrs, a dtype,
a memory layout, the aliasing of the arguments...) and a replay of the first signature.
Everything runs from that text, so the repr that hypothesis prints for a failure is the
program itself, ready to paste into a regression test (``from fuzz_programs import OP,
total`` gives the names it uses besides ``np``, ``xr`` and ``lf``).

``x`` is a DataArray or a Dataset (coordinates with attrs, index and non-index; NaN, inf
and signed zeros among the values; C, Fortran, transposed, reversed or strided memory),
``y`` a DataArray that is independent of ``x``, ``x`` itself, a DataArray holding the very
array of ``x`` or a view that overlaps it; ``s`` a Python number (or NumPy scalar, or 0-d
array) and ``k`` a static argument (a number, a string or a tuple).

Operations are drawn one at a time against a *probe*: the program so far, run eagerly on
the first call's arguments (on one example of them under vmap), so that each drawn
operation is valid for the dims, dtypes and coordinates its input has. A candidate that
raises there is drawn again: the programs are honest, their eager run succeeds. The
vocabulary: the unary and binary elementwise entries of the operator table
(``opinfo.OP_DB``), operators, comparisons and ``where``, reductions (skipna paths
included), rolls, shifts and windows, in-place writes (``+=``, ``v[idx] = c``, ``.loc``,
into the arguments too, through views), views (slices, transposes), casts, labels,
Datasets, random draws (``lf.random`` with seeds and generators made inside; NumPy's
global state), and uses of ``s`` and ``k``.

``check_case`` is the oracle: the wrapping run without ``lf.jit`` at each call, against
``lf.jit`` of it (``assert_same``: structure, labels and values as the contract says).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import math
import re
import warnings
from typing import Any

import numpy as np
import xarray as xr
from hypothesis import reject
from hypothesis import strategies as st

import labeled_func as lf

try:  # works with and without a tests/__init__.py
    from opinfo import OP_DB, elementwise_samples
except ImportError:  # pragma: no cover
    from tests.opinfo import OP_DB, elementwise_samples

thresholds = importlib.import_module("labeled_func.engine.compiler.thresholds")

WRAPPINGS = ("jit", "jit_vmap", "jit_grad", "jit_vmap_grad")
DIMS = ("a", "b", "c")
MAX_OPERATIONS = 6
FUSION_THRESHOLDS = ("FUSE_MIN_SIZE", "CHEAP_FUSE_MIN_SIZE", "POOL_MIN_BYTES", "BAND_MIN_SIZE")


# --- the vocabulary of the operator table ------------------------------------------------------
def _elementwise_entries(arity):
    """The table's elementwise entries of one arity, less those that are another entry's
    values (``*_special_values``, ``*_at_zero``), run Python per element (``vectorize``) or
    pick their dtype from the values (``real_if_close``, refused under lf.jit)."""
    skipped = ("vectorize", "real_if_close", "special_values", "_at_zero", "_near_zero", "_at_one", "lambda_zero")
    return {op.name: op for op in OP_DB
            if isinstance(op.sample_inputs, functools.partial) and op.sample_inputs.func is elementwise_samples
            and len(op.sample_inputs.keywords["shapes"][0]) == arity and not any(word in op.name for word in skipped)}


UNARY = _elementwise_entries(1)
BINARY = _elementwise_entries(2)
OP = {name: op.op for name, op in {**UNARY, **BINARY}.items()}
"""The operator table's callables by entry name: ``OP['scipy_erf'](v)`` in a program."""


ENGINE_DIFFERS_FROM_NUMPY = {
    # table entry: the input dtypes where lf's kernels (under every transform, not only lf.jit)
    # return other bits or another dtype than NumPy/SciPy's function; tests/test_jit_contract_found.py
    # holds one strict xfail per entry. Drawn for the transforms, whose oracle runs the same kernels;
    # not for lf.jit(f), whose oracle is NumPy. (None now: the kernels call NumPy's own functions.)
}


ENGINE_DIFFERS_IN_METHODS = [
    # (a drawn line, the dtype kinds of v): where lf's kernels differ from NumPy outside lf.jit
    # too (tests/test_jit_contract_found.py); not drawn for lf.jit(f). (None now.)
]


def engine_differs(lines, value):
    """Whether ``lines`` meet an entry of ``ENGINE_DIFFERS_IN_METHODS`` on ``value`` (its
    dtypes' kinds: a change of precision keeps them)."""
    kinds = {np.dtype(array.dtype).kind for array in _variables_of(value)}
    return any(pattern.search(line) and kinds & set(dtype_kinds)
               for line in lines for pattern, dtype_kinds in ENGINE_DIFFERS_IN_METHODS)


def _spelled(name):
    """How a program calls the table's entry ``name``: ``np.sin`` where it is NumPy's own."""
    function = OP[name]
    if getattr(np, getattr(function, "__name__", ""), None) is function and name == function.__name__:
        return f"np.{name}"
    return f"OP[{name!r}]"


# NumPy's ufuncs that the replay may fuse (numexpr): drawn more often than the rest
FUSABLE_UNARY = [name for name in ("sin", "cos", "tan", "exp", "expm1", "log", "log1p", "log10", "sqrt", "tanh",
                                   "sinh", "cosh", "arctan", "arcsin", "arccos", "absolute", "negative", "square",
                                   "reciprocal", "abs", "sign", "floor", "ceil") if name in UNARY]
FUSABLE_BINARY = [name for name in ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
                                    "arctan2", "less", "greater_equal", "equal", "logical_and", "where")
                  if name in BINARY]


# --- Python literals ------------------------------------------------------------------------------
def lit(value) -> str:
    """``value`` as Python source that evaluates to the same value, type and bits (``-0.0``,
    ``nan``, ``np.float32(1.5)``, ``np.array(2.0, dtype='float32')``)."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return f"np.array({lit(value.item())}, dtype={value.dtype.name!r})"
        return f"np.array({lit(value.tolist())}, dtype={value.dtype.name!r})"
    if isinstance(value, np.generic):
        return f"np.{type(value).__name__}({lit(value.item())})"
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, complex):
        return f"complex({lit(value.real)}, {lit(value.imag)})"
    if isinstance(value, tuple):
        inner = ", ".join(lit(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no literal for {value!r}")


def same_literal(a, b) -> bool:
    """Whether two Python values are the same program constant (type and bits)."""
    return type(a) is type(b) and lit(a) == lit(b)


# --- arguments: specs that render as source ------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class ArraySpec:
    """A NumPy array: its values (as drawn: float64, int64, bool or complex128), its dtype,
    and its memory layout: ``C``, ``F`` (Fortran order), ``T`` (a transposed view, axes
    ``perm``), ``R`` (reversed along the first axis: a negative stride) or ``S`` (every
    other element of a larger array)."""

    values: np.ndarray
    dtype: str
    layout: str = "C"
    perm: tuple = ()

    def source(self) -> str:
        v, dtype = self.values, repr(self.dtype)
        if self.layout == "F":
            return f"np.asfortranarray(np.array({lit(v.tolist())}, dtype={dtype}))"
        if self.layout == "T":
            inverse = tuple(int(i) for i in np.argsort(self.perm))
            return f"np.array({lit(v.transpose(self.perm).tolist())}, dtype={dtype}).transpose{inverse}"
        if self.layout == "R":
            return f"np.array({lit(v[::-1].tolist())}, dtype={dtype})[::-1]"
        if self.layout == "S":
            filler = np.zeros_like(v) if v.dtype.kind == "b" else np.full_like(v, 7)
            padded = np.stack([v, filler], axis=-1).reshape(v.shape[:-1] + (2 * v.shape[-1],))
            return f"np.array({lit(padded.tolist())}, dtype={dtype})[..., ::2]"
        return f"np.array({lit(v.tolist())}, dtype={dtype})"


@dataclasses.dataclass(frozen=True, eq=False)
class CoordSpec:
    name: str
    dims: tuple
    values: Any
    attrs: dict

    def source(self) -> str:
        return f"{self.name!r}: ({self.dims!r}, {lit(self.values)}, {lit(self.attrs)})"


@dataclasses.dataclass(frozen=True, eq=False)
class DataArraySpec:
    data: ArraySpec
    dims: tuple
    coords: tuple = ()
    name: str | None = "x"
    attrs: dict = dataclasses.field(default_factory=dict)

    def source(self) -> str:
        coords = "{" + ", ".join(c.source() for c in self.coords) + "}"
        return (f"xr.DataArray({self.data.source()}, dims={self.dims!r}, coords={coords}, name={self.name!r}, "
                f"attrs={lit(self.attrs)})")

    @property
    def sizes(self):
        return dict(zip(self.dims, self.data.values.shape))


@dataclasses.dataclass(frozen=True, eq=False)
class DatasetSpec:
    variables: tuple  # ((name, dims, ArraySpec, attrs), ...)
    coords: tuple = ()
    attrs: dict = dataclasses.field(default_factory=dict)

    def source(self) -> str:
        variables = ", ".join(f"{name!r}: ({dims!r}, {data.source()}, {lit(attrs)})"
                              for name, dims, data, attrs in self.variables)
        coords = "{" + ", ".join(c.source() for c in self.coords) + "}"
        return f"xr.Dataset({{{variables}}}, coords={coords}, attrs={lit(self.attrs)})"

    @property
    def sizes(self):
        sizes = {}
        for _, dims, data, _ in self.variables:
            sizes.update(zip(dims, data.values.shape))
        return sizes


@dataclasses.dataclass(frozen=True, eq=False)
class CallSpec:
    """The arguments of one call: ``x`` (a spec), ``y`` (a spec, or source reading ``x``:
    ``x``, ``x.isel(b=slice(1, None))``), ``s`` and ``k`` (Python values)."""

    x: DataArraySpec | DatasetSpec
    y: DataArraySpec | str
    s: Any
    k: Any

    def lines(self):
        y = self.y if isinstance(self.y, str) else self.y.source()
        return [f"x = {self.x.source()}", f"y = {y}", f"s = {lit(self.s)}", f"k = {lit(self.k)}"]

    def build(self):
        namespace = dict(NAMESPACE)
        exec("\n".join(self.lines()), namespace)
        return namespace["x"], namespace["y"], namespace["s"], namespace["k"]

    @property
    def y_reads_x(self):
        return isinstance(self.y, str)


def total(out, skipna=False):
    """The loss that the grad wrappings differentiate: every element of every output of
    ``f`` summed (real parts of complex values; integers and booleans as float64)."""
    if isinstance(out, (tuple, list)):
        return sum(total(part, skipna) for part in out)
    if isinstance(out, xr.Dataset):
        return sum(total(out[name], skipna) for name in out.data_vars)
    kind = np.dtype(out.dtype).kind
    if kind == "c":
        out = out.real
    elif kind != "f":
        out = out.astype("float64")
    return out.sum(skipna=skipna)


NAMESPACE = {"np": np, "xr": xr, "lf": lf, "OP": OP, "total": total, "nan": math.nan, "inf": math.inf}


# --- a case: the program, its wrapping, its calls, what must happen ------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Case:
    wrapping: str
    body: tuple
    output: str
    calls: tuple  # four CallSpecs: trace, replay, retrace, replay of the first signature
    change: str  # what call 3 changes
    dim: str | None = None
    randomness: str = "different"
    argnums: Any = 0
    skipna: bool = False
    writes_into_arguments: bool = False  # the program writes into memory its arguments hold
    numpy_global_random: bool = False

    def function_source(self) -> str:
        lines = ["def f(x, y, s, k):", "    v = x"] + [f"    {line}" for line in self.body]
        return "\n".join(lines + [f"    return {self.output}"])

    def transform_source(self) -> str:
        mapped = f"dim={self.dim!r}, randomness={self.randomness!r}"
        loss = ("def loss(x, y, s, k):\n"
                f"    return total(f(x, y, s, k), skipna={self.skipna})\n")
        return {
            "jit": "transform = f",
            "jit_vmap": f"transform = lf.vmap(f, {mapped})",
            "jit_grad": f"{loss}transform = lf.grad(loss, argnums={self.argnums!r})",
            "jit_vmap_grad": f"{loss}transform = lf.vmap(lf.grad(loss, argnums={self.argnums!r}), {mapped})",
        }[self.wrapping]

    def transform(self):
        namespace = dict(NAMESPACE)
        exec(self.function_source() + "\n" + self.transform_source(), namespace)
        return namespace["transform"]

    def _repr_pretty_(self, printer, cycle):  # hypothesis prints the program, not the fields
        printer.text(repr(self))

    def __repr__(self) -> str:
        titles = ("traced", "replayed: the same signature, other values", f"traced again: {self.change}",
                  "replayed: call 1's signature, other values")
        parts = [self.function_source(), self.transform_source(), "jitted = lf.jit(transform, static_argnames='k')"]
        for number, (call, title) in enumerate(zip(self.calls, titles), 1):
            parts.append(f"# call {number}, {title} (lf.random.seed({number}) before the eager and the jitted call)")
            parts.extend(call.lines())
        notes = []
        if self.writes_into_arguments:
            notes.append("writes into its arguments' memory")
        if self.numpy_global_random:
            notes.append("draws from NumPy's global state")
        head = f"Case({self.wrapping}{': ' + ', '.join(notes) if notes else ''})"
        return head + "\n" + "\n".join(parts)


# --- values ---------------------------------------------------------------------------------------------
def make_values(seed, shape, kind, specials):
    """Values of ``kind`` ('f', 'i', 'b', 'c'): small, rounded to two decimals (short to
    print), with NaN, infinities and signed zeros in a third of them when ``specials``."""
    rng = np.random.default_rng(seed)
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind == "i":
        return rng.integers(-3, 4, shape).astype(np.int64)
    if kind == "c":
        values = np.empty(shape, dtype=np.complex128)
        values.real = make_values(seed + 1, shape, "f", specials)
        values.imag = make_values(seed + 2, shape, "f", specials)
        return values
    values = np.round(rng.uniform(-3.0, 3.0, shape), 2)
    if specials:
        chosen = rng.choice(np.array([math.nan, math.inf, -math.inf, 0.0, -0.0]), size=shape)
        values = np.where(rng.random(shape) < 0.33, chosen, values)
    return np.asarray(values, dtype=np.float64)


def revalued(spec, seed):
    """``spec`` with other values of the same shapes and dtypes (the same signature)."""
    if isinstance(spec, ArraySpec):
        specials = spec.values.dtype.kind in "fc" and not np.isfinite(spec.values).all()
        return dataclasses.replace(spec, values=make_values(seed, spec.values.shape, spec.values.dtype.kind,
                                                           specials or seed % 3 == 0))
    if isinstance(spec, DataArraySpec):
        return dataclasses.replace(spec, data=revalued(spec.data, seed))
    if isinstance(spec, DatasetSpec):
        return dataclasses.replace(spec, variables=tuple((name, dims, revalued(data, seed + i), attrs)
                                                         for i, (name, dims, data, attrs) in enumerate(spec.variables)))
    if isinstance(spec, np.ndarray):  # a 0-d array argument: traced, its value may change
        return np.asarray(spec + 0.25, dtype=spec.dtype)
    return spec


DTYPE_KINDS = {"float64": "f", "float32": "f", "int64": "i", "int32": "i", "bool": "b", "complex128": "c",
               "complex64": "c"}
OTHER_PRECISION = {"float64": "float32", "float32": "float64", "int64": "int32", "int32": "int64",
                   "complex128": "complex64", "complex64": "complex128"}


@st.composite
def array_specs(draw, shape, dtypes):
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    specials = DTYPE_KINDS[dtype] in "fc" and draw(st.booleans(), label="specials")
    seed = draw(st.integers(0, 2**16), label="values")
    layouts = ["C"] + (["F", "T"] if len(shape) >= 2 else []) + (["R", "S"] if len(shape) >= 1 else [])
    layout = draw(st.sampled_from(layouts), label="layout")
    perm = ()
    if layout == "T":
        perm = tuple(draw(st.permutations(range(len(shape))).filter(lambda p: list(p) != sorted(p))))
    return ArraySpec(make_values(seed, shape, DTYPE_KINDS[dtype], specials), dtype, layout, perm)


@st.composite
def coord_specs(draw, sizes):
    """Index coordinates (integer, float or string labels) on some dims, a non-index
    coordinate along one, a scalar coordinate; attrs on some of them."""
    coords = []
    attrs = st.sampled_from([{}, {"units": "s"}, {"units": "km", "axis": 1}])
    for dim, n in sizes.items():
        kind = draw(st.sampled_from(["none", "int", "float", "str"]), label=f"index {dim}")
        if kind == "none":
            continue
        labels = {"int": [10 * i + 1 for i in range(n)], "float": [0.5 * i - 1.0 for i in range(n)],
                  "str": [f"{dim}{i}" for i in range(n)]}[kind]
        coords.append(CoordSpec(dim, (dim,), labels, draw(attrs)))
    if sizes and draw(st.booleans(), label="non-index coordinate"):
        dim = draw(st.sampled_from(sorted(sizes)))
        coords.append(CoordSpec("lab", (dim,), [0.25 * i for i in range(sizes[dim])], draw(attrs)))
    if draw(st.booleans(), label="scalar coordinate"):
        coords.append(CoordSpec("when", (), 3, draw(attrs)))
    return tuple(coords)


@st.composite
def x_specs(draw, dtypes, dataset):
    ndim = draw(st.integers(1, 3), label="ndim")
    dims = tuple(draw(st.permutations(DIMS))[:ndim])
    sizes = {d: draw(st.integers(1, 4), label=f"size {d}") for d in dims}
    coords = draw(coord_specs(sizes))
    attrs = draw(st.sampled_from([{}, {"units": "m"}, {"units": "m", "scale": 2}]), label="attrs")
    if not dataset:
        data = draw(array_specs(tuple(sizes.values()), dtypes))
        return DataArraySpec(data, dims, coords, draw(st.sampled_from(["x", None])), attrs)
    w_dims = tuple(draw(st.permutations(dims))[:draw(st.integers(1, ndim))])
    variables = tuple((name, vdims, draw(array_specs(tuple(sizes[d] for d in vdims), dtypes)),
                       draw(st.sampled_from([{}, {"units": "K"}])))
                      for name, vdims in (("u", dims), ("w", w_dims)))
    return DatasetSpec(variables, coords, attrs)


# Python numbers (and NumPy scalars, 0-d arrays) for ``s``; values for the static ``k``
SCALARS = [0.0, -0.0, 1.0, -1.5, 2.5, 1, 2, 0, -1, True, False, math.nan, math.inf,
           np.float32(1.5), np.float64(-0.0), np.int64(2), np.array(1.5), np.array(0.5, dtype="float32"),
           np.array(2)]
STATICS = [1, 1.0, True, 2, 2.0, 0.0, -0.0, 0, False, 0.5, "sum", "mean", "max", "min",
           (1, 2.0), (1.0, 2.0), (True, 0), (2, -0.0)]


def number_alternatives(value):
    """Numbers that hash and compare like ``value`` or nearly (1, 1.0, True; 0.0, -0.0),
    or differ only in type: each is another program."""
    if isinstance(value, np.ndarray):
        return [np.asarray(value, dtype=OTHER_PRECISION.get(value.dtype.name, "float64"))]
    if isinstance(value, np.generic):
        return [value.item(), np.float32(value.item()) if not isinstance(value, np.float32) else np.float64(value)]
    if isinstance(value, str):
        return [name for name in ("sum", "mean", "max", "min") if name != value]
    if isinstance(value, tuple):
        return [value[:i] + (alternative,) + value[i + 1:]
                for i, element in enumerate(value) for alternative in number_alternatives(element)]
    options = [float(value), int(value) if not math.isnan(value) and not math.isinf(value) else -value,
               -value, np.float64(value)]
    if value in (0, 1) and not math.isnan(value):
        options += [bool(value), int(value), float(value), -float(value)]
    return [option for option in options if not same_literal(option, value)]


@st.composite
def y_specs(draw, x, dtypes, mapped_dim):
    """``y``: an independent DataArray over some of ``x``'s dims (and its index labels), or
    ``x`` itself, a DataArray holding ``x``'s array, or a view overlapping ``x``."""
    source = "x" if isinstance(x, DataArraySpec) else "x['u']"
    dims = x.dims if isinstance(x, DataArraySpec) else x.variables[0][1]
    sizes = x.sizes
    views = []
    if len(dims) >= 2:
        views.append(f"{source}.transpose{tuple(reversed(dims))!r}")
    views += [f"{source}.isel({d}=slice(1, None))" for d in dims if d != mapped_dim and sizes[d] >= 2]
    views += [f"{source}.isel({d}=slice(None, None, -1))" for d in dims if d != mapped_dim and sizes[d] >= 2]
    kinds = ["independent", "independent", "same", "shares"] + (["view"] if views else [])
    kind = draw(st.sampled_from(kinds), label="y")
    if kind == "same":
        return source
    if kind == "shares":
        return f"xr.DataArray({source}.data, dims={source}.dims, name='y')"
    if kind == "view":
        return draw(st.sampled_from(views))
    y_dims = tuple(draw(st.permutations(dims))[:draw(st.integers(1, len(dims)))])
    data = draw(array_specs(tuple(sizes[d] for d in y_dims), dtypes))
    coords = tuple(c for c in x.coords if c.dims and c.dims[0] == c.name and c.name in y_dims
                   and draw(st.booleans()))
    return DataArraySpec(data, y_dims, coords, "y", draw(st.sampled_from([{}, {"units": "m"}])))


# --- the probe ----------------------------------------------------------------------------------------
def quietly():
    """NumPy's floating-point warnings and xarray's warnings off (NaN and inf are inputs)."""
    stack = contextlib.ExitStack()
    stack.enter_context(np.errstate(all="ignore"))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def example_of(args, dim):
    """One example of the arguments of a vmap over ``dim`` (identity kept: ``y is x``)."""
    if dim is None:
        return args
    made = {}
    out = []
    for arg in args:
        if isinstance(arg, (xr.DataArray, xr.Dataset)) and dim in arg.dims:
            if id(arg) not in made:
                made[id(arg)] = arg.isel({dim: 0})
            arg = made[id(arg)]
        out.append(arg)
    return tuple(out)


class Probe:
    """The program so far, run eagerly on the first call's arguments (one example of
    them under vmap): its last state, to draw the next operation against."""

    def __init__(self, call, dim, grad):
        self.call, self.dim, self.grad = call, dim, grad

    def run(self, body, output="v"):
        """The state ``(v, x, y, s, k, rng, out)`` after ``body`` (``out``: ``output``'s value);
        raises what the body raises."""
        source = "\n".join(["def probe(x, y, s, k):", "    v = x"] + [f"    {line}" for line in body]
                           + [f"    out = {output}", "    return v, x, y, s, k, locals().get('rng'), out"])
        namespace = dict(NAMESPACE)
        exec(source, namespace)
        args = example_of(self.call.build(), self.dim)
        with quietly():
            state = namespace["probe"](*args)
            if not isinstance(state[0], (xr.DataArray, xr.Dataset)):
                raise TypeError(f"v is a {type(state[0]).__name__}, not a labeled value")
            if self.grad:
                total(state[-1])
        return state

    def writes_into_arguments(self, body, output):
        """Whether the whole program writes into memory that its arguments hold: run with
        those arrays read-only, it raises NumPy's error about them."""
        source = "\n".join(["def f(x, y, s, k):", "    v = x"] + [f"    {line}" for line in body]
                           + [f"    return {output}"])
        namespace = dict(NAMESPACE)
        exec(source, namespace)
        args = self.call.build()
        for arg in args[:2]:
            for array in _arrays_of(arg):
                if isinstance(array, np.ndarray):
                    array.flags.writeable = False
        args = example_of(args, self.dim)  # views of read-only arrays are read-only
        try:
            with quietly():
                namespace["f"](*args)
        except ValueError as error:  # xarray words it its own way for a view
            return "read-only" in str(error) or "destination is a view" in str(error)
        return False


def _arrays_of(value):
    if isinstance(value, xr.DataArray):
        return [value.data]
    if isinstance(value, xr.Dataset):
        return [value[name].data for name in value.data_vars]
    return []


# --- operations ---------------------------------------------------------------------------------------------
CONSTANTS = [0.0, -0.0, 1, 2, -1, 0.5, -1.5, 2.5, 3.0, 1.0, True, math.nan, math.inf]
PLAIN_CONSTANTS = [0.5, -1.5, 2.5, 2, 1, -0.0, 3.0]
KINDS = (["unary"] * 4 + ["binary_constant"] * 3 + ["binary_argument"] * 2 + ["operator"] * 2 + ["where"] * 2
         + ["reduce"] * 3 + ["shift"] * 2 + ["inplace"] * 5 + ["view"] * 3 + ["cast"] * 2 + ["labels"]
         + ["dataset"] + ["random"] + ["static"] * 2 + ["scalar"] * 2)


def _variables_of(value):
    if isinstance(value, xr.DataArray):
        return [value]
    return list(value.data_vars.values()) if isinstance(value, xr.Dataset) else []


def _dims(value):
    return list(value.dims)


def _constant(draw, plain=False):
    return lit(draw(st.sampled_from(PLAIN_CONSTANTS if plain else CONSTANTS), label="constant"))


def _slice(draw, n):
    start = draw(st.integers(0, n - 1), label="start")
    stop = draw(st.integers(start + 1, n), label="stop")
    step = draw(st.sampled_from([1, 1, 2]), label="step")
    return f"slice({start}, {stop}{', ' + str(step) if step != 1 else ''})"


def draw_operation(draw, state, numpy_oracle):
    """Source lines of one operation on ``v``, valid (most of the time) for ``state``.
    With ``numpy_oracle`` (the program runs bare, its oracle is NumPy) no entry of
    ``ENGINE_DIFFERS_FROM_NUMPY`` for the dtypes at hand."""
    v, x, y, s, k, rng, _ = state
    sizes = dict(v.sizes)
    dims = [d for d in _dims(v) if sizes[d]]  # a dim of size 0 (after a diff) has no element to index
    dataset = isinstance(v, xr.Dataset)
    kind = draw(st.sampled_from(KINDS), label="kind")
    if kind in ("reduce", "shift", "view") and not dims:
        kind = "unary"
    if kind in ("unary", "binary_constant", "binary_argument"):
        in_play = {np.dtype(array.dtype).name for value in (v, x, y) for array in _variables_of(value)}
        in_play |= {OTHER_PRECISION.get(name, name) for name in in_play}  # call 3 may change a precision

        def allowed(name):
            return not numpy_oracle or not in_play & set(ENGINE_DIFFERS_FROM_NUMPY.get(name, "").split())
    if kind == "unary":
        names = FUSABLE_UNARY if draw(st.booleans()) else sorted(UNARY)
        names = [name for name in names if allowed(name)]
        return [f"v = {_spelled(draw(st.sampled_from(names), label='unary'))}(v)"]
    if kind in ("binary_constant", "binary_argument"):
        names = FUSABLE_BINARY if draw(st.booleans()) else sorted(BINARY)
        names = [name for name in names if allowed(name)]
        name = _spelled(draw(st.sampled_from(names), label="binary"))
        other = _constant(draw) if kind == "binary_constant" else draw(st.sampled_from(["y", "s", "x"]))
        first, second = ("v", other) if draw(st.booleans()) else (other, "v")
        return [f"v = {name}({first}, {second})"]
    if kind == "operator":
        template = draw(st.sampled_from(["v = v {op} {c}", "v = {c} {op} v", "v = v {op} y", "v = -v", "v = abs(v)",
                                         "v = ~v", "v = v ** 2", "v = v {cmp} {c}", "v = v {cmp} y"]))
        return [template.format(op=draw(st.sampled_from(["+", "-", "*", "/", "//", "%"])),
                                cmp=draw(st.sampled_from(["<", ">", "==", "!=", ">=", "<="])), c=_constant(draw))]
    if kind == "where":
        template = draw(st.sampled_from([
            "v = xr.where(v > {c}, v, {c2})", "v = v.where(v < {c})", "v = v.where(v != {c}, {c2})",
            "v = v.fillna({c})", "v = xr.where(y > {c}, v, y)", "v = v.clip({lo}, {hi})",
            "v = xr.where(np.isnan(v), {c2}, v)", "v = v.where(y > {c}, s)"]))
        return [template.format(c=_constant(draw), c2=_constant(draw), lo=draw(st.sampled_from([-1.0, 0.0, -0.0])),
                                hi=draw(st.sampled_from([1, 2.5])))]
    if kind == "reduce":
        d = draw(st.sampled_from(dims), label="dim")
        method = draw(st.sampled_from(["sum", "mean", "max", "min", "prod", "std", "var", "median", "any", "all",
                                       "argmax", "argmin", "cumsum", "cumprod", "count", "sum_all", "sum_dims"]))
        if method == "sum_all":
            return [f"v = v.sum(skipna={draw(st.sampled_from([None, True, False]))})"]
        if method == "sum_dims":
            chosen = draw(st.permutations(dims))[:draw(st.integers(1, len(dims)))]
            return [f"v = v.mean({list(chosen)!r})"]
        options = draw(st.sampled_from(["", ", skipna=False", ", skipna=True", ", keep_attrs=True", ", ddof=1",
                                        ", min_count=2"]))
        if options == ", ddof=1" and method not in ("std", "var"):
            options = ""
        if options == ", min_count=2" and method not in ("sum", "prod"):
            options = ""
        return [f"v = v.{method}({d!r}{options})"]
    if kind == "shift":
        d = draw(st.sampled_from(dims), label="dim")
        n = draw(st.integers(-3, 3), label="by")
        return [draw(st.sampled_from([
            f"v = v.roll({{{d!r}: {n}}})", f"v = v.roll({{{d!r}: {n}}}, roll_coords=True)",
            f"v = v.shift({{{d!r}: {n}}})", f"v = v.shift({{{d!r}: {n}}}, fill_value={_constant(draw, True)})",
            f"v = v.diff({d!r})", f"v = v.rolling({{{d!r}: 2}}, min_periods=1).mean()",
            f"v = v.rolling({{{d!r}: 2}}).sum()", f"v = v.pad({{{d!r}: (1, 0)}}, mode='edge')",
            f"v = v.cumsum({d!r}, skipna=False)"]))]
    if kind == "inplace":
        return _inplace(draw, v, x, y, dims, sizes, dataset)
    if kind == "view":
        d = draw(st.sampled_from(dims), label="dim")
        options = [f"v = v.isel({{{d!r}: {_slice(draw, sizes[d])}}})",
                   f"v = v.isel({{{d!r}: {draw(st.integers(-sizes[d], sizes[d] - 1))}}})",
                   f"v = v.isel({{{d!r}: slice(None, None, -1)}})", "v = v.squeeze()"]
        if len(dims) >= 2:
            options += [f"v = v.transpose{tuple(draw(st.permutations(dims)))!r}", "v = v.T" if not dataset else "v = v"]
        return [draw(st.sampled_from(options))]
    if kind == "cast":
        target = draw(st.sampled_from(["float32", "float64", "int64", "int32", "bool", "complex128", "complex64"]))
        return [draw(st.sampled_from([f"v = v.astype({target!r})", "v = v.real", "v = v.imag",
                                      "v = v.astype(y.dtype)", "v = v.astype(x.dtype)"]))]
    if kind == "labels":
        options = ["v = v.assign_attrs(note='drawn')", "v = v.copy()", "v = v.copy(deep=False)",
                   "v = v.reset_coords(drop=True)", "v = v.assign_coords(extra=v * 2)" if not dataset else
                   "v = v.assign_coords(extra=v['u'] * 2)", "v = v.drop_attrs()"]
        if not dataset:
            options += ["v = v.rename('out')", "v = v.rename(None)"]
        if dims:
            options.append(f"v = v.rename({{{draw(st.sampled_from(dims))!r}: 'z'}})")
        return [draw(st.sampled_from(options))]
    if kind == "dataset":
        if dataset:
            names = list(v.data_vars)
            if not names:
                return ["v = v"]
            name = draw(st.sampled_from(names))
            return [draw(st.sampled_from([f"v = v[{name!r}]", f"v = v.assign(z=v[{name!r}] * 2)",
                                          f"v = v[[{name!r}]]", "v = v.to_dataarray('var')",
                                          f"v = v.drop_vars({name!r})" if len(names) > 1 else "v = v"]))]
        return [draw(st.sampled_from(["v = v.to_dataset(name='q')", "v = xr.Dataset({'p': v, 'q': y})",
                                      "v = v + x['w']" if isinstance(x, xr.Dataset) else "v = v + x"]))]
    if kind == "random" and not dataset:
        choice = draw(st.sampled_from(["normal", "uniform", "seed", "rng", "unused", "numpy"]))
        if choice == "normal":
            return ["v = v + lf.random.normal(like=v)"]
        if choice == "uniform":
            return ["v = v * lf.random.uniform(like=v, low=0.5, high=1.5)"]
        if choice == "seed":
            return [f"lf.random.seed({draw(st.integers(0, 9))})", "v = v + lf.random.normal(like=v)"]
        if choice == "rng":
            return ([] if rng is not None else [f"rng = np.random.default_rng({draw(st.integers(0, 9))})"]) + [
                "v = v + lf.random.uniform(like=v, rng=rng)"]
        if choice == "unused":
            return ["lf.random.normal(sizes={'z': 3})", "v = v - lf.random.uniform(like=v)"]
        return ["v = v + np.random.random()"]
    if kind == "static":
        if isinstance(k, str):
            if not dims:
                return ["v = v * 1"]
            return [f"v = getattr(v, k)({draw(st.sampled_from(dims))!r})"]
        if isinstance(k, tuple):
            return ["v = v * k[0] + k[1]"]
        return [draw(st.sampled_from(["v = v * k", "v = v + k", "v = k - v"]))]
    return [draw(st.sampled_from(["v = v * s", "v = v + s", "v = s - v", "v = v / s", "v = np.copysign(v, s)",
                                  "v = xr.where(v > s, v, s)", "v = np.maximum(v, s)"]))]


def _inplace(draw, v, x, y, dims, sizes, dataset):
    """A write: into ``v`` (an argument, or a view of one, until an operation copied it),
    into ``x`` or ``y`` themselves."""
    c = _constant(draw, plain=True)
    operator = draw(st.sampled_from(["+=", "-=", "*=", "/="]))
    options = [f"v {operator} {c}", f"v {operator} y", "v += v"]
    if dataset:
        name = draw(st.sampled_from(list(v.data_vars) or ["u"]))
        if name in v.data_vars and v[name].dims:
            d = draw(st.sampled_from(list(v[name].dims)))
            options.append(f"v[{name!r}][{{{d!r}: 0}}] = {c}")
    elif dims:
        d = draw(st.sampled_from(dims), label="dim")
        n = sizes[d]
        i = draw(st.integers(-n, n - 1), label="index")
        options += [f"v[{{{d!r}: {i}}}] = {c}", f"v[{{{d!r}: {_slice(draw, n)}}}] = {c}",
                    f"v[{{{d!r}: {i}}}] = np.sin(v[{{{d!r}: {draw(st.integers(-n, n - 1))}}}])",
                    f"v[{{{d!r}: {i}}}] = y.mean()" if y is not None else f"v[{{{d!r}: {i}}}] = s",
                    f"v[{{{d!r}: {i}}}] = s"]
        if d in v.indexes:
            label = v.indexes[d][draw(st.integers(0, n - 1))]
            label = label.item() if hasattr(label, "item") else label
            options.append(f"v.loc[{{{d!r}: {lit(label)}}}] = {c}")
    x_array = x["u"] if isinstance(x, xr.Dataset) else x
    if x_array.dims:
        d = draw(st.sampled_from(list(x_array.dims)))
        target = "x['u']" if isinstance(x, xr.Dataset) else "x"
        options += [f"{target}[{{{d!r}: 0}}] = {c}", f"{target} {operator} {c}"]
    if isinstance(y, xr.DataArray) and y.dims:
        d = draw(st.sampled_from(list(y.dims)))
        options += [f"y[{{{d!r}: -1}}] = {c}", f"y {operator} {c}"]
    return [draw(st.sampled_from(options))]


# --- drawing a case -------------------------------------------------------------------------------------------
@st.composite
def cases(draw, wrapping):
    """One case for ``wrapping`` (one of WRAPPINGS): arguments, program, calls."""
    grad = wrapping in ("jit_grad", "jit_vmap_grad")
    mapped = wrapping in ("jit_vmap", "jit_vmap_grad")
    dtypes = (["float64"] * 4 + ["float32"] * 2 + ["complex128"]) if grad else (
        ["float64"] * 4 + ["float32"] * 2 + ["int64", "bool", "complex128"])
    dataset = draw(st.integers(0, 4), label="dataset") == 4  # shrinks to a DataArray
    x = draw(x_specs(dtypes, dataset))
    dim = draw(st.sampled_from(sorted(x.sizes)), label="mapped dim") if mapped else None
    y = draw(y_specs(x, dtypes, dim))
    s = draw(st.sampled_from(SCALARS), label="s")
    k = draw(st.sampled_from(STATICS), label="k")
    first = CallSpec(x, y, s, k)
    randomness = draw(st.sampled_from(["different", "different", "same", "error"])) if mapped else "different"
    y_floating = (isinstance(y, DataArraySpec) and DTYPE_KINDS[y.data.dtype] == "f") or (
        isinstance(y, str) and grad)
    argnums = draw(st.sampled_from([0, (0, 1)])) if grad and y_floating else 0

    probe = Probe(first, dim, grad)
    body = []
    state = probe.run(body)
    for _ in range(draw(st.integers(1, MAX_OPERATIONS), label="operations")):
        for _attempt in range(6):
            candidate = draw_operation(draw, state, numpy_oracle=wrapping == "jit")
            if wrapping == "jit" and engine_differs(candidate, state[0]):
                continue
            try:
                new_state = probe.run(body + candidate)
            except Exception:  # noqa: BLE001 - not valid here: draw another
                continue
            body += candidate
            state = new_state
            break
    output = draw(st.sampled_from(["v", "v", "v, x"]), label="output")
    try:
        probe.run(body, output)
    except Exception:  # noqa: BLE001
        output = "v"
    body = tuple(body)
    writes = probe.writes_into_arguments(body, output)

    second = CallSpec(revalued(x, 1000 + draw(st.integers(0, 99))),
                      y if isinstance(y, str) else revalued(y, 2000 + draw(st.integers(0, 99))), revalued(s, 0), k)
    fourth = CallSpec(revalued(x, 3000 + draw(st.integers(0, 99))),
                      y if isinstance(y, str) else revalued(y, 4000), revalued(s, 0), k)
    third, change = draw(changed_signatures(first))
    return Case(wrapping, body, output, (first, second, third, fourth), change, dim, randomness, argnums,
                draw(st.booleans(), label="loss skipna"), writes, any("np.random.random" in line for line in body))


@st.composite
def changed_signatures(draw, call):
    """``call`` with one part of its signature changed, and what changed."""
    x, y = call.x, call.y
    options = ["static", "static", "scalar", "scalar", "attrs", "dtype", "layout"]
    if x.coords:
        options += ["coord attrs", "coord attrs"]
    if any(c.dims == (c.name,) and not isinstance(c.values[0], str) for c in x.coords):
        options.append("coord values")
    if isinstance(x, DataArraySpec):
        options.append("name")
    if isinstance(y, str) and "isel" not in y and "transpose" not in y:
        options.append("alias")
    copied = "x.copy(deep=True)" if isinstance(x, DataArraySpec) else "x['u'].copy(deep=True)"
    for _ in range(10):
        change = draw(st.sampled_from(options), label="change")
        if change == "static":
            k = draw(st.sampled_from(number_alternatives(call.k)))
            return dataclasses.replace(call, k=k), f"k {lit(call.k)} -> {lit(k)}"
        if change == "scalar":
            s = draw(st.sampled_from(number_alternatives(call.s)))
            return dataclasses.replace(call, s=s), f"s {lit(call.s)} -> {lit(s)}"
        if change == "coord attrs":
            coord = draw(st.sampled_from(x.coords))
            attrs = {"units": "changed"} if coord.attrs != {"units": "changed"} else {}
            new = dataclasses.replace(coord, attrs=attrs)
            coords = tuple(new if c is coord else c for c in x.coords)
            return (dataclasses.replace(call, x=dataclasses.replace(x, coords=coords)),
                    f"the attrs of coordinate {coord.name!r} {coord.attrs} -> {attrs}")
        if change == "coord values":
            coord = draw(st.sampled_from([c for c in x.coords if c.dims == (c.name,)
                                          and not isinstance(c.values[0], str)]))
            new = dataclasses.replace(coord, values=[value + 100 for value in coord.values])
            coords = tuple(new if c is coord else c for c in x.coords)
            return (dataclasses.replace(call, x=dataclasses.replace(x, coords=coords)),
                    f"the labels of {coord.name!r} shifted by 100")
        if change == "attrs":
            return dataclasses.replace(call, x=dataclasses.replace(x, attrs={"units": "changed"})), "x's attrs"
        if change == "name":
            name = "renamed" if x.name else "x"
            return dataclasses.replace(call, x=dataclasses.replace(x, name=name)), f"x's name -> {name!r}"
        if change == "alias":
            return dataclasses.replace(call, y=copied), f"y = {y} -> y = {copied}"
        data = x.data if isinstance(x, DataArraySpec) else x.variables[0][2]
        if change == "dtype" and data.dtype in OTHER_PRECISION:  # the same kind: a float stays a float under grad
            new_data = dataclasses.replace(data, dtype=OTHER_PRECISION[data.dtype])
        elif change == "layout" and data.values.ndim >= 1:
            layouts = [layout for layout in ("C", "F", "R", "S") if layout != data.layout
                       and (layout != "F" or data.values.ndim >= 2)]
            new_data = dataclasses.replace(data, layout=draw(st.sampled_from(layouts)), perm=())
            if _strides(new_data) == _strides(data):
                continue
        else:
            continue
        if isinstance(x, DataArraySpec):
            new_x = dataclasses.replace(x, data=new_data)
        else:
            name, dims, _, attrs = x.variables[0]
            new_x = dataclasses.replace(x, variables=((name, dims, new_data, attrs),) + x.variables[1:])
        what = f"x's dtype {data.dtype} -> {new_data.dtype}" if change == "dtype" else \
            f"x's layout {data.layout} -> {new_data.layout}"
        return dataclasses.replace(call, x=new_x), what
    k = draw(st.sampled_from(number_alternatives(call.k)))
    return dataclasses.replace(call, k=k), f"k {lit(call.k)} -> {lit(k)}"


def _strides(spec):
    return eval(spec.source(), dict(NAMESPACE)).strides


# --- the oracle -------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def fusing_everything():
    """Fusion (numexpr), buffer reuse and banded matrices at every size: the thresholds of the
    replay at 0."""
    saved = {name: getattr(thresholds, name) for name in FUSION_THRESHOLDS}
    try:
        for name in saved:
            setattr(thresholds, name, 0)
        yield
    finally:
        for name, value in saved.items():
            setattr(thresholds, name, value)


def _outcome(function, args):
    with quietly():
        try:
            return function(*args), None
        except Exception as error:  # noqa: BLE001 - compared below
            return None, error


def known_open(case):
    """Whether ``case`` meets a documented exception of the contract (docs/jit.md, each a
    strict xfail in tests/test_jit_contract_found.py): a write into an argument laid out
    with negative or skipping strides (the program's value of it is contiguous, and NumPy's
    SIMD loops may round a transcendental function of it otherwise), or into ``x.real`` /
    ``x.imag`` of a complex argument (refused under lf.jit: not a view in the program)."""
    if case.wrapping in ("jit", "jit_vmap") and _writes_into_a_part(case.body):
        return True  # refused with UnsupportedOperationError, where NumPy writes through the view
    if case.wrapping == "jit" and _writes_after(case.body, "v = v.imag"):
        return True  # x.imag of a real array is a constant: a traced value written into what is made
        # from it goes into a plain array (InplaceError), where NumPy writes into a fresh array
    if not case.writes_into_arguments or case.wrapping not in ("jit", "jit_vmap"):
        return False
    specs = [spec for call in case.calls for spec in (call.x, call.y) if not isinstance(spec, str)]
    return any(data.layout in ("R", "S") for spec in specs for data in _array_specs(spec))


def _writes_after(body, line):
    """Whether ``body`` writes in place into ``v`` after ``line``."""
    return line in body and any(_is_write(later) for later in body[body.index(line) + 1:])


def _is_write(line):
    return line.startswith("v[") or line.split(" ", 2)[1:2] in (["+="], ["-="], ["*="], ["/="])


def _writes_into_a_part(body):
    """Whether ``body`` writes in place into ``v`` while it is ``x.real`` / ``x.imag`` of a
    complex value (a view that lf.jit refuses to write into)."""
    part = False
    for line in body:
        if line in ("v = v.real", "v = v.imag"):
            part = True
        elif line.startswith("v = "):
            part = False  # a new value
        elif part and _is_write(line):
            return True
    return False


def _array_specs(spec):
    """The ArraySpecs of the data of a DataArraySpec or DatasetSpec."""
    if isinstance(spec, DatasetSpec):
        return [data for _, _, data, _ in spec.variables]
    return [spec.data]


def check_case(case, fused=False):
    """Run ``case``'s four calls eagerly (the wrapping without jit) and through ``lf.jit``;
    fail where the contract says otherwise. Calls whose eager run fails outside the
    policies are rejected (the program is not honest for those arguments), and so are the
    documented exceptions (:func:`known_open`)."""
    if known_open(case):
        reject()
    transform = case.transform()
    jitted = lf.jit(transform, static_argnames="k")
    signatures = ("first", "first", "changed", "first")
    traced = set()
    for number, (call, signature) in enumerate(zip(case.calls, signatures), 1):
        eager_args, jit_args = call.build(), call.build()
        eager_arrays, jit_arrays = _caller_arrays(eager_args), _caller_arrays(jit_args)
        lf.random.seed(number)
        expected, eager_error = _outcome(transform, eager_args)
        lf.random.seed(number)
        got, error = _outcome(jitted, jit_args)
        where = f"call {number} ({'traced' if signature not in traced else 'replayed'})"
        if eager_error is not None and not isinstance(eager_error, lf.TransformError):
            if number == 1:
                reject()
            continue  # arguments that the program does not take (a retraced dtype, say)
        must_raise = _policy_error(case, call, eager_error)
        if must_raise is not None:
            assert isinstance(error, must_raise), (
                f"{where}: expected lf.{must_raise.__name__} ({_why(case, eager_error)}), "
                f"lf.jit {'returned' if error is None else 'raised ' + repr(error)}")
            if must_raise is lf.InplaceError and eager_error is None:  # the overlap: which argument
                assert re.search(r"'[xy]'", str(error)), f"{where}: the InplaceError names no argument: {error}"
            continue
        if error is not None and case.wrapping in ("jit_grad", "jit_vmap_grad") and isinstance(
                error, lf.InplaceError) and call.y_reads_x and case.writes_into_arguments:
            # under grad the writes are functional: refusing overlapping arguments is allowed too, and
            # a write into x's memory through y (grad's alias guard, which lf.jit applies to every later
            # call: it cannot see that this call's write left the values as they were, NaN + 0.5)
            continue
        if error is not None:
            raise AssertionError(f"{where}: lf.jit raised where the eager call returned: {error!r}") from error
        assert_same(got, expected, fused=fused, where=f"{where}: output")
        assert_same(jit_arrays, eager_arrays, fused=fused, where=f"{where}: the caller's arrays after the call")
        traced.add(signature)
        rule = "a new signature must trace again" if signature == "changed" else "the same signature must replay"
        assert jitted.traces == len(traced), (
            f"{where}: {jitted.traces} traces after {number} calls of {len(traced)} signatures ({rule})")


def _caller_arrays(args):
    """The NumPy arrays that the caller's ``x`` and ``y`` hold (a Dataset's ``+=`` replaces
    its variables by new arrays and leaves these alone: what an in-place write writes
    through to is memory, not the Python objects around it)."""
    return tuple(array for arg in args[:2] for array in _arrays_of(arg))


def _overlapping(call):
    return call.y_reads_x and ("isel" in call.y or "transpose" in call.y)


def _policy_error(case, call, eager_error):
    """The policy error that lf.jit must raise for this call, or None."""
    if eager_error is not None:
        return type(eager_error)
    if case.numpy_global_random:
        return lf.RandomnessError
    if _overlapping(call) and case.writes_into_arguments and case.wrapping in ("jit", "jit_vmap"):
        return lf.InplaceError
    return None


def _why(case, eager_error):
    if eager_error is not None:
        return f"the eager call raised {eager_error!r}"
    if case.numpy_global_random:
        return "the program draws from NumPy's global random state"
    return "y overlaps x without being x, and the program writes into them"


# --- comparison ------------------------------------------------------------------------------------------------
def assert_same(got, expected, *, fused=False, where="output"):
    """``got`` is ``expected``: the same types and structure, dims in the same order, the
    same coordinates (values, dtypes, attrs), names, attrs and dtypes; values bit for bit
    (NaN where NaN, the signs of zeros), except that with ``fused`` float64 values may
    differ by 1e-12 relative (numexpr's transcendental functions)."""
    assert type(got) is type(expected), f"{where}: a {type(got).__name__}, expected a {type(expected).__name__}"
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), f"{where}: {len(got)} items, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, fused=fused, where=f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), f"{where}: keys {list(got)}, expected {list(expected)}"
        for key in expected:
            assert_same(got[key], expected[key], fused=fused, where=f"{where}[{key!r}]")
    elif isinstance(expected, xr.DataArray):
        assert got.name == expected.name, f"{where}: name {got.name!r}, expected {expected.name!r}"
        _same_variable(got.variable, expected.variable, fused, where)
        _same_coords(got, expected, fused, where)
    elif isinstance(expected, xr.Dataset):
        assert list(got.data_vars) == list(expected.data_vars), (
            f"{where}: variables {list(got.data_vars)}, expected {list(expected.data_vars)}")
        _same_attrs(got.attrs, expected.attrs, f"{where}.attrs")
        sizes, expected_sizes = dict(got.sizes), dict(expected.sizes)
        assert sizes == expected_sizes, f"{where}: sizes {sizes}, expected {expected_sizes}"
        for name in expected.data_vars:
            _same_variable(got[name].variable, expected[name].variable, fused, f"{where}[{name!r}]")
        _same_coords(got, expected, fused, where)
    elif isinstance(expected, xr.Variable):
        _same_variable(got, expected, fused, where)
    elif isinstance(expected, (np.ndarray, np.generic)):
        _same_values(np.asarray(got), np.asarray(expected), fused, where)
    else:
        assert same_literal(got, expected), f"{where}: {got!r}, expected {expected!r}"


def _same_coords(got, expected, fused, where):
    assert list(got.coords) == list(expected.coords), (
        f"{where}: coordinates {list(got.coords)}, expected {list(expected.coords)}")
    assert set(got.xindexes) == set(expected.xindexes), (
        f"{where}: indexes {set(got.xindexes)}, expected {set(expected.xindexes)}")
    for name in expected.coords:
        _same_variable(got.coords[name].variable, expected.coords[name].variable, fused,
                       f"{where}.coords[{name!r}]")


def _same_variable(got, expected, fused, where):
    assert got.dims == expected.dims, f"{where}: dims {got.dims}, expected {expected.dims}"
    _same_attrs(got.attrs, expected.attrs, f"{where}.attrs")
    assert type(got.data) is type(expected.data) or isinstance(got.data, np.ndarray), (
        f"{where}: data is a {type(got.data).__name__}, expected a {type(expected.data).__name__}")
    _same_values(np.asarray(got.data), np.asarray(expected.data), fused, where)


def _same_attrs(got, expected, where):
    assert list(got) == list(expected), f"{where}: keys {list(got)}, expected {list(expected)}"
    for key, value in expected.items():
        other = got[key]
        if isinstance(value, np.ndarray):
            assert isinstance(other, np.ndarray) and np.array_equal(other, value), f"{where}[{key!r}]: {other!r}"
        else:
            assert type(other) is type(value) and (other == value or other != other and value != value), (
                f"{where}[{key!r}]: {other!r}, expected {value!r}")


def _same_values(got, expected, fused, where):
    assert got.dtype == expected.dtype, f"{where}: dtype {got.dtype}, expected {expected.dtype}"
    assert got.shape == expected.shape, f"{where}: shape {got.shape}, expected {expected.shape}"
    if expected.dtype.kind == "c":
        _same_values(got.real.copy(), expected.real.copy(), fused, f"{where}.real")
        _same_values(got.imag.copy(), expected.imag.copy(), fused, f"{where}.imag")
        return
    if expected.dtype.kind == "O":  # xarray's shift of booleans: NaN among Python objects (float or NumPy's)
        differ = np.frompyfunc(_different_objects, 2, 1)(got, expected).astype(bool)
        assert not np.any(differ), _first_difference(got, expected, differ, where)
        return
    if expected.dtype.kind != "f":
        differ = got != expected
        assert not np.any(differ), _first_difference(got, expected, differ, where)
        return
    nan = np.isnan(expected)
    differ = np.isnan(got) != nan
    if fused and expected.dtype == np.float64:
        finite = np.isfinite(expected)
        scale = 1.0 + np.max(np.abs(expected[finite]), initial=0.0)
        with np.errstate(all="ignore"):
            far = np.abs(got - expected) > 1e-12 * np.maximum(np.abs(expected), scale * 1e-3)
        differ |= ~nan & np.where(finite, far, got != expected)
    else:
        bits = np.dtype(f"u{expected.dtype.itemsize}")
        differ |= ~nan & (got.view(bits) != expected.view(bits))
    assert not np.any(differ), _first_difference(got, expected, differ, where)


def _different_objects(got, expected):
    booleans = (bool, np.bool_)
    if isinstance(got, booleans) != isinstance(expected, booleans):
        return True
    return not (got == expected or got != got and expected != expected)


def _first_difference(got, expected, differ, where):
    index = tuple(int(i) for i in np.argwhere(differ)[0]) if got.ndim else ()
    g, e = got[index], expected[index]
    shown = (f"{g!r} ({float(g).hex()}), expected {e!r} ({float(e).hex()})"
             if expected.dtype.kind == "f" else f"{g!r}, expected {e!r}")
    return f"{where}: {int(np.sum(differ))} value(s) differ, first at {index}: {shown}"
