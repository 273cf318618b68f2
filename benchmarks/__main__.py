"""Run every `benchmarks/bench_*.py` module's `main()` and print one table.

Each module's `main()` returns rows: dicts with the keys `benchmark`, `value`,
`baseline`, `unit`, `ratio`, `target` and `met`.
"""

import importlib
import pkgutil

import benchmarks

COLUMNS = ("benchmark", "value", "baseline", "ratio", "target")


def main() -> None:
    rows = []
    for module in sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__)):
        if module.startswith("bench_"):
            rows.extend(importlib.import_module(f"benchmarks.{module}").main())
    print_table([format_row(row) for row in rows])


def format_row(row: dict) -> dict:
    return {
        "benchmark": row["benchmark"],
        "value": f"{row['value']:.3g} {row['unit']}",
        "baseline": f"{row['baseline']:.3g} {row['unit']}",
        "ratio": f"{row['ratio']:.2f}",
        "target": f"{row['target']} ({'met' if row['met'] else 'MISSED'})",
    }


def print_table(rows: list[dict]) -> None:
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in COLUMNS}
    line = "  ".join(c.ljust(widths[c]) for c in COLUMNS)
    print(line)
    print("  ".join("-" * widths[c] for c in COLUMNS))
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in COLUMNS))


if __name__ == "__main__":
    main()
