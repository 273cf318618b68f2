"""A one-shot call: the eager vmap(grad), a fresh `lf.jit`'s first call, and the chunked
vmap whose chunks are one lf.jit program (`lf.vmap(..., chunk_size=k, jit=True)`).

Most scripts call `lf.vmap(lf.grad(model))` once, on a big batch.  A fresh `lf.jit` of it
traces on the whole batch (the function runs, computing as it records) and returns what
the trace computed; its passes run at its first replay (`Program.ready`), so a one-shot
call never pays for them.  The chunked vmap traces on the first chunk of k examples and
replays the program on every other chunk (its second chunk pays for the passes).  Each figure is one call of a freshly built object (the best of
REPEATS such calls), against the eager call in the same process:

- Ishigami per-sample gradients, N = 1e6 (bench_speed's samples, bench_autodiff's model);
- the advection-diffusion model of bench_speed (64 cells x 200 explicit Euler steps,
  3 parameters, N = 2,000);
- the Jacobian of the Lorenz-96 tendency (bench_autodiff's), `lf.jacrev`, M = 400 and 2,000
  (the first call only: there is no batch to chunk).

Then the last, shorter chunk (a third of k): what it costs un-jitted, or traced as a
second program, against a replay of the last k examples (an overlap whose extra outputs
are dropped: what chunks.py does, but under randomness="different").

`--profile` prints where a fresh lf.jit's first call goes (cProfile, cumulative seconds):
the trace (the function run under the compiler level) and putting the outputs together;
then where its first replay goes: each pass of `Program.prune`, the planning of buffers,
and the run.

Replays allocate their fresh buffers anew at each call (unless ``keep_buffers=True``); on
Linux NumPy asks for transparent huge pages for large arrays, and where the kernel then
compacts memory on a fault (``defrag`` set to ``madvise``) a replay that follows a fresh
trace can spend most of a second in the kernel (measured: 1.0 s of system time in a 1.4 s
replay of the advection model, against 0.04 s usually).  The replay rows vary with it;
the script prints the machine's setting first.  ``NUMPY_MADVISE_HUGEPAGE=0`` switches
NumPy's request off (then every replay takes its pages 4 KiB at a time: steadier, slower).

    PYTHONPATH=. .venv/bin/python -m benchmarks.bench_first_call [--profile | --large]

``--large`` runs the advection-diffusion rows at N = 20,000 instead (chunks of 2,500).
"""
from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import time

import numpy as np
import xarray as xr

import labeled_func as lf
from benchmarks.bench_autodiff import FORCING, ishigami, lorenz96
from benchmarks.bench_speed import FLOW_N, ISHIGAMI_N, advection_diffusion, flow_parameters, ishigami_samples
from benchmarks.bench_vmap import best_time

REPEATS = 5
ISHIGAMI_CHUNKS = (100_000, 250_000)
FLOW_CHUNKS = (250, 500)
LARGE_FLOW_N, LARGE_FLOW_CHUNKS = 20_000, (2_500,)  # --large: where the batch, not Python, costs


LORENZ_SITES = (400, 2_000)


def main() -> list[dict]:
    rows = []
    for name, func, samples, chunk in workloads():
        rows += first_call_rows(name, func, samples, chunk)
    return rows + jacobian_rows()


def large_rows():
    """The advection-diffusion rows at N = 20,000 (``--large``; two rounds, about two
    minutes): there the kernels cost more than the model's ~9,400 operations of Python, which
    every trace pays as the eager call does."""
    flow = xr.Dataset({name: ("sample", v) for name, v in flow_parameters(LARGE_FLOW_N).items()})
    return first_call_rows(f"advection-diffusion vmap(grad) (N={LARGE_FLOW_N:,})", advection_diffusion, flow,
                           LARGE_FLOW_CHUNKS, repeats=2)


def jacobian_rows(sites=LORENZ_SITES):
    """A fresh lf.jit(lf.jacrev(lorenz96))'s first call against the eager jacrev, and its replay."""
    rows = []
    for m in sites:
        state = xr.DataArray(FORCING + np.random.default_rng(1).normal(size=m), dims="site")
        eager = lf.jacrev(lorenz96)
        want = eager(state)
        np.testing.assert_array_equal(lf.jit(lf.jacrev(lorenz96))(state).values, want.values)
        jitted = lf.jit(lf.jacrev(lorenz96))
        jitted(state)
        np.testing.assert_array_equal(jitted(state).values, want.values)
        best = interleaved({"eager": lambda: eager(state), "first": lambda: lf.jit(lf.jacrev(lorenz96))(state),
                            "replay": lambda: jitted(state)}, repeats=3 * REPEATS)
        rows += [ratio_row(f"Lorenz-96 Jacobian, jacrev (M={m:,}): a fresh lf.jit's first call / the eager call",
                           best["first"], best["eager"], 1.0),
                 ratio_row("  lf.jit's replay (for reference) / the eager call", best["replay"], best["eager"], None)]
    return rows


def workloads():
    _, ishigami_data = ishigami_samples(ISHIGAMI_N)
    flow = xr.Dataset({name: ("sample", v) for name, v in flow_parameters(FLOW_N).items()})
    return [(f"Ishigami per-sample grads (N={ISHIGAMI_N:.0e})", ishigami, ishigami_data, ISHIGAMI_CHUNKS),
            (f"advection-diffusion vmap(grad) (N={FLOW_N:,})", advection_diffusion, flow, FLOW_CHUNKS)]


def ratio_row(benchmark, value_s, baseline_s, goal):
    ratio = value_s / baseline_s
    return {"benchmark": benchmark, "value": value_s * 1e3, "baseline": baseline_s * 1e3, "unit": "ms",
            "ratio": ratio, "target": "none (for reference)" if goal is None else f"ratio <= {goal}",
            "met": goal is None or ratio <= goal}


def check(got, want):
    for name in want.data_vars:  # lf.jit's fused sin/cos: within 1e-12 of NumPy's (docs/jit.md)
        np.testing.assert_allclose(got[name].values, want[name].values, rtol=1e-12, atol=1e-14)


def first_call_rows(name, func, samples, chunks, repeats=REPEATS):
    per_sample = lambda **options: lf.vmap(lf.grad(func), dim="sample", **options)  # noqa: E731
    small = samples.isel(sample=slice(0, 8))
    per_sample()(small), lf.jit(per_sample())(small), per_sample(chunk_size=4, jit=True)(small)  # imports, caches
    want = per_sample()(samples)
    check(lf.jit(per_sample())(samples), want)
    for chunk in chunks:
        check(per_sample(chunk_size=chunk, jit=True)(samples), want)
    jitted = lf.jit(per_sample())
    jitted(samples)
    calls = {"eager": lambda: per_sample()(samples), "first": lambda: lf.jit(per_sample())(samples),
             "replay": lambda: jitted(samples), "eager chunks": lambda: per_sample(chunk_size=chunks[0])(samples)}
    calls.update({chunk: (lambda chunk=chunk: per_sample(chunk_size=chunk, jit=True)(samples)) for chunk in chunks})
    best = interleaved(calls, repeats)
    eager_s = best["eager"]
    rows = [ratio_row(f"{name}: a fresh lf.jit's first call / the eager call", best["first"], eager_s, 1.0)]
    rows += [ratio_row(f"  chunk_size={chunk:,}, jit=True (one call) / the eager call", best[chunk], eager_s, 1.0)
             for chunk in chunks]
    rows += [
        ratio_row(f"  chunk_size={chunks[0]:,}, jit=False (one call) / the eager call", best["eager chunks"], eager_s,
                  None),
        ratio_row("  lf.jit's replay (for reference) / the eager call", best["replay"], eager_s, None),
    ]
    return rows + last_chunk_rows(per_sample, samples, chunks[0])


def interleaved(calls, repeats=REPEATS):
    """{name: the best seconds of ``calls[name]()``}, the calls taking turns (each round times
    every one once): a machine whose load drifts slows them alike.  Each starts after a full
    collection, so that none pays for the cyclic garbage another left (a fresh lf.jit's
    program, dropped: about 0.4-0.8 s of the advection model's next call)."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, call in calls.items():
            gc.collect()  # the garbage of the call before (a fresh lf.jit's program) is not this call's
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def last_chunk_rows(per_sample, samples, chunk):
    """The shorter last chunk (a third of a chunk): un-jitted, or a second trace, against the
    replay of an overlapping whole chunk (chosen)."""
    whole, rest = samples.isel(sample=slice(0, chunk)), samples.isel(sample=slice(0, max(1, chunk // 3)))
    jitted = lf.jit(per_sample())
    jitted(whole)
    best = interleaved({"replay": lambda: jitted(whole), "eager": lambda: per_sample()(rest),
                        "trace": lambda: lf.jit(per_sample())(rest)})
    replay_s, eager_s, trace_s = best["replay"], best["eager"], best["trace"]
    return [ratio_row(f"  last chunk of {rest.sizes['sample']:,}: un-jitted / an overlapping replay of {chunk:,} "
                      "(chosen)", eager_s, replay_s, None),
            ratio_row("  last chunk: a second trace / an overlapping replay (chosen)", trace_s, replay_s, None)]


# --- where a fresh lf.jit's first call goes --------------------------------------------------------
PASSES = (  # (label, module path suffix, function name): cumulative seconds under cProfile, inside prune
    ("drop_ones", "compiler/passes.py", "drop_ones"),
    ("simplify", "compiler/passes.py", "simplify"),
    ("fuse (numexpr trees)", "compiler/fusion.py", "fuse"),
    ("contract", "compiler/passes.py", "contract"),
    ("spread", "compiler/passes.py", "spread"),
    ("fold_rolls", "compiler/passes.py", "fold_rolls"),
    ("rematerialize", "compiler/passes.py", "rematerialize"),
    ("share_checks", "compiler/passes.py", "share_checks"),
    ("dead code (_drop_dead, twice)", "compiler/program.py", "_drop_dead"),
    ("planning: slabs (_lay_out_slabs)", "compiler/planning.py", "_lay_out_slabs"),
)
RECORDING = (  # what the compiler level adds to each operation while tracing
    ("JitLevel.read (the values and slots of operands)", "compiler/level.py", "read"),
    ("_lowered (the callable a node will run)", "compiler/level.py", "_lowered"),
    ("_fusable (a node's fusion spelling)", "compiler/fusion.py", "_fusable"),
    ("_node_key (common operations found once)", "compiler/level.py", "_node_key"),
)


def cumulative(stats, path, function):
    return sum(entry[3] for (file, _, name), entry in stats.items()
               if file.replace("\\", "/").endswith(path) and name == function)


def profile(name, func, samples):
    """Where a fresh lf.jit's first call of vmap(grad(func)) goes, printed."""
    lf.jit(lf.vmap(lf.grad(func), dim="sample"))(samples.isel(sample=slice(0, 8)))  # imports, caches
    jitted = lf.jit(lf.vmap(lf.grad(func), dim="sample"))
    first, replay = cProfile.Profile(), cProfile.Profile()
    for profiler in (first, replay):  # the first call, then the first replay (which prunes)
        profiler.enable()
        jitted(samples)
        profiler.disable()
    replay_s = best_time(lambda: jitted(samples), REPEATS)
    small = samples.isel(sample=slice(0, 8))  # kernels cost nothing there: the trace's own cost
    small_first_s, small_prune_s, small_eager_s = timed_first_call(func, small)
    first_s, prune_s, eager_s = timed_first_call(func, samples)
    print(f"\n{name}: eager {eager_s * 1e3:.0f} ms, a fresh lf.jit's first call {first_s * 1e3:.0f} ms "
          f"({first_s / eager_s:.2f}x), a replay {replay_s * 1e3:.0f} ms ({replay_s / eager_s:.2f}x).")
    stats = pstats.Stats(first).stats
    total = cumulative(stats, "labeled_func/jit.py", "__call__")

    def line(label, seconds):
        print(f"  {label:<58} {seconds * 1e3:8.1f} ms  {100 * seconds / total:5.1f}%")

    print(f"The first call under cProfile, {total * 1e3:.0f} ms:")
    trace = cumulative(stats, "labeled_func/jit.py", "_trace")
    line("trace: the function run under the compiler level", trace)
    for label, path, function in RECORDING:
        line("  " + label, cumulative(stats, path, function))
    line("signature and outputs (the rest of the call)", total - trace)
    stats = pstats.Stats(replay).stats
    total = cumulative(stats, "labeled_func/jit.py", "__call__")
    prune = cumulative(stats, "compiler/program.py", "prune")
    print(f"The first replay under cProfile, {total * 1e3:.0f} ms:")
    line("passes and planning (Program.prune, once)", prune)
    for label, path, function in PASSES:
        line("  " + label, cumulative(stats, path, function))
    line("the run (Program.run without the prune) and the outputs", total - prune)
    print(f"  without cProfile: the first call {first_s * 1e3:.0f} ms, the prune at the first replay "
          f"{prune_s * 1e3:.0f} ms; on 8 samples: eager {small_eager_s * 1e3:.1f} ms, the first call "
          f"{small_first_s * 1e3:.1f} ms, the prune {small_prune_s * 1e3:.1f} ms (what tracing and the passes "
          "add, whatever the batch)")


def timed_first_call(func, samples):
    """(seconds of a fresh lf.jit's first call, of Program.prune at its first replay, of the
    eager call): the best of REPEATS, the calls taking turns."""
    from labeled_func.engine.compiler.program import Program

    original, spent = Program.prune, []

    def prune(self):
        start = time.perf_counter()
        try:
            return original(self)
        finally:
            spent.append(time.perf_counter() - start)

    best, eager = (float("inf"), 0.0), float("inf")
    Program.prune = prune
    try:
        for _ in range(REPEATS):
            start = time.perf_counter()
            lf.vmap(lf.grad(func), dim="sample")(samples)
            eager = min(eager, time.perf_counter() - start)
            spent.clear()
            jitted = lf.jit(lf.vmap(lf.grad(func), dim="sample"))
            start = time.perf_counter()
            jitted(samples)
            first = time.perf_counter() - start
            jitted(samples)  # the first replay prunes
            best = min(best, (first, sum(spent)))
    finally:
        Program.prune = original
    return (*best, eager)


def huge_pages() -> str:
    """The kernel's transparent-huge-page settings, where it tells them."""
    found = []
    for name in ("enabled", "defrag"):
        try:
            with open(f"/sys/kernel/mm/transparent_hugepage/{name}") as file:
                found.append(f"{name} {file.read().strip()}")
        except OSError:
            return "transparent huge pages: not known here"
    return "transparent huge pages: " + ", ".join(found)


if __name__ == "__main__":
    print(huge_pages())
    if "--profile" in sys.argv:
        for name, func, samples, _ in workloads():
            profile(name, func, samples)
    else:
        for row in large_rows() if "--large" in sys.argv else main():
            target = f"{row['target']} ({'met' if row['met'] else 'MISSED'})"
            print(f"{row['benchmark']:<82} {row['value']:9.1f} ms {row['baseline']:9.1f} ms "
                  f"{row['ratio']:6.2f}  {target}")
