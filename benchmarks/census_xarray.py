"""The xarray-method census: every case of tests/census_xarray.py under vmap (V), grad (G)
and jit (J), each against its oracle (the per-example loop, central finite differences,
the un-jitted function), and one table of the outcomes.

    PYTHONPATH=. .venv/bin/python -m benchmarks.census_xarray              # the table
    PYTHONPATH=. .venv/bin/python -m benchmarks.census_xarray --markdown   # as Markdown
    PYTHONPATH=. .venv/bin/python -m benchmarks.census_xarray -k weighted  # cases named so
    PYTHONPATH=. .venv/bin/python -m benchmarks.census_xarray --branches agree  # V, J under branches="agree"

Prints the counts per transform and outcome (ok, refused, wrong, crash, n/a, skipped), how
many distinct cases are refused under some transform, then the refused cases grouped by the
first line of their message, then every wrong or crashing case (a crash with its traceback
under ``-v``).  Exits with 1 where a case is
wrong or crashes.  Not one of ``python -m benchmarks``' timed rows (no ``bench_`` prefix).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict

from tests import census_xarray as census


def _reason(error: str) -> str:
    """The message without where it was called from, so that equal refusals group."""
    return re.sub(r" \(called from [^)]*\)", "", error)


def format_table(rows: list[list[str]], columns: list[str], markdown: bool) -> str:
    """``rows`` under ``columns``: Markdown, or aligned text (the first column to the left)."""
    if markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    fmt = "  ".join(f"{{:>{w}}}" if i else f"{{:<{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [columns, *rows])


def table(outcomes, markdown: bool = False) -> str:
    counts = census.counts(outcomes)
    rows = [[t, *(str(counts[t][o]) for o in census.OUTCOMES)] for t in census.TRANSFORMS]
    rows.append(["all", *(str(sum(counts[t][o] for t in census.TRANSFORMS)) for o in census.OUTCOMES)])
    return format_table(rows, ["transform", *census.OUTCOMES], markdown)


def refused_cases(outcomes) -> str:
    """How many distinct cases some transform refuses (a case refused under V and J counts once)."""
    cases = {o.case for o in outcomes if o.outcome == "refused"}
    return f"\nrefused cases (under some transform): {len(cases)} of {len({o.case for o in outcomes})}"


def outcome_lines(outcomes, verbose: bool = False, by: str = "reason", width: int = 160) -> list[str]:
    """The refused runs grouped by their message (where it was called from left out), then
    the wrong and crashing ones (with their tracebacks when ``verbose``): lines of the report
    of this census and of the library census."""
    lines = []
    refused = defaultdict(list)
    for o in outcomes:
        if o.outcome == "refused":
            refused[_reason(o.error)].append(f"{o.case}:{o.transform}")
    if refused:
        lines.append(f"\nrefused ({sum(map(len, refused.values()))}), by {by}:")
        for reason, names in sorted(refused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"  {len(names):3d}  {reason[:width]}")
            lines.append(f"       {' '.join(names)}")
    for kind in ("wrong", "crash"):
        bad = [o for o in outcomes if o.outcome == kind]
        if bad:
            lines.append(f"\n{kind} ({len(bad)}):")
            for o in bad:
                lines.append(f"  {o.case}:{o.transform}  {o.error[:width + 40]}")
                if verbose and o.detail:
                    lines.append("    " + o.detail.replace("\n", "\n    "))
    return lines


def listing(outcomes, verbose: bool = False) -> str:
    lines = outcome_lines(outcomes, verbose)
    skipped = sorted({f"{o.case} ({o.error})" for o in outcomes if o.outcome == "skipped"})
    if skipped:
        lines.append(f"\nskipped: {', '.join(skipped)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.census_xarray",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the counts as a Markdown table")
    parser.add_argument("-k", metavar="TEXT", default="", help="only the cases whose name contains TEXT")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the traceback of each crash")
    parser.add_argument("--branches", choices=["error", "agree"], default="error",
                        help="vmap's branches= policy for V and J (default: the documented 'error')")
    args = parser.parse_args(argv)
    cases = [c for c in census.CASES if args.k in c.name]
    start = time.perf_counter()
    outcomes = census.run_census(cases, vmap_kwargs={} if args.branches == "error" else {"branches": args.branches})
    seconds = time.perf_counter() - start
    print(f"xarray-method census: {len(cases)} cases x {len(census.TRANSFORMS)} transforms "
          f"(V vmap vs the loop, G grad vs central differences, J jit vs un-jitted; vmap "
          f"branches={args.branches!r}) in {seconds:.1f} s\n")
    print(table(outcomes, markdown=args.markdown))
    print(refused_cases(outcomes))
    print(listing(outcomes, verbose=args.verbose))
    return 1 if any(o.outcome in ("wrong", "crash") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
