"""`make bench`: every benchmark in bench/, one table — figure, target, measured ratio, holds.

Each figure is a ratio (or a bound) of things measured side by side in the same run, because this
machine is shared and noisy; absolute times are printed beside it for information. Run:
``python bench/run_all.py [--quick] [--only NAME …]``. Exit status 1 if a target does not hold.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness_bench  # noqa: E402
import import_bench  # noqa: E402
import pages_bench  # noqa: E402
import prefix_cache_bench  # noqa: E402
import startup_bench  # noqa: E402
import stats_bench  # noqa: E402


def rows_harness(r: dict) -> list[tuple]:
    return [
        ("harness throughput / bare AsyncOpenAI (3000 calls, 20 ms, c=32)", "≥ 0.85", r["runner_vs_bare"],
         r["runner_vs_bare"] >= 0.85,
         f"runner {r['runner_calls_per_s']:.0f}/s, bare {r['bare_calls_per_s']:.0f}/s"),
        ("concurrency 32 / concurrency 1 (throughput)", "≥ 20", r["c32_vs_c1"], r["c32_vs_c1"] >= 20,
         f"c=32 {r['runner_calls_per_s']:.0f}/s, c=1 {r['serial_calls_per_s']:.1f}/s"),
    ]


def rows_prefix(r: dict) -> list[tuple]:
    shared, first = r["split_single_shared"], r["split_single_criterion_first"]
    return [("split/single wall time, local judge, ~900-token prompts, shared prefix", "≤ 1.5", shared,
             shared <= 1.5, f"criterion-first layout: {first:.2f}")]


def rows_stats(r: dict) -> list[tuple]:
    return [("statistics, 100k × 10 criteria × 4 sources (seconds)", "≤ 1 s", r["stats_seconds"],
             r["stats_seconds"] <= 1.0, f"{r['ratio']:.0f}× faster than per-pair pandas/scikit-learn "
             f"({r['baseline_seconds']:.0f} s)")]


def rows_import(r: dict) -> list[tuple]:
    return [("100k-row import / row-by-row ORM insert", "≥ 5", r["ratio"], r["ratio"] >= 5,
             f"judgekit {r['judgekit_s']:.1f} s, ORM {r['orm_row_by_row_s']:.1f} s")]


def rows_pages(r: dict) -> list[tuple]:
    return [
        ("pages, 100k examples × 4 runs: slowest first render (s)", "≤ 3 s", r["first_s"], r["first_s"] <= 3.0,
         f"empty matrix cache: {r['cold_associations_s']:.1f} s"),
        ("pages: slowest cached re-render (s)", "≤ 0.5 s", r["cached_s"], r["cached_s"] <= 0.5, ""),
        ("pages: peak memory of the rendering process (MB)", "≤ 600", r["peak_mb"], r["peak_mb"] <= 600, ""),
    ]


def rows_startup(r: dict) -> list[tuple]:
    return [
        ("judgekit --help (s)", "≤ 0.35 s", r["help"], r["help"] <= 0.35,
         f"python -c pass {r['python']:.2f} s, import typer {r['typer']:.2f} s"),
        ("import judgekit.cli (s)", "", r["import_cli"], True, "no heavy library loaded (tests/test_cli_startup.py)"),
        (f"start-up share of a {r['calls']:,}-call run, 20 ms endpoint, c=32", "≤ 10 %", r["share"],
         r["share"] <= 0.10, f"first call after {r['startup_s']:.2f} s of {r['total_s']:.2f} s"),
    ]


BENCHES = {
    "harness": (harness_bench.run, rows_harness),
    "prefix": (prefix_cache_bench.run, rows_prefix),
    "stats": (stats_bench.run, rows_stats),
    "import": (import_bench.run, rows_import),
    "pages": (pages_bench.run, rows_pages),
    "startup": (startup_bench.run, rows_startup),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (the targets are for full size)")
    parser.add_argument("--only", nargs="*", choices=list(BENCHES), default=list(BENCHES))
    args = parser.parse_args()
    table: list[tuple] = []
    for name in args.only:
        run, rows = BENCHES[name]
        t0 = time.perf_counter()
        print(f"== {name} …", flush=True)
        try:
            table += rows(run(quick=args.quick))
        except Exception as exc:  # a broken bench is a row that does not hold, not a crash of the table
            table.append((f"{name}: failed", "", float("nan"), False, f"{type(exc).__name__}: {exc}"))
        print(f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
    width = max(len(r[0]) for r in table)
    print()
    print(f"| {'figure':<{width}} | target | measured | holds | beside it |")
    print(f"|{'-' * (width + 2)}|--------|----------|-------|-----------|")
    for figure, target, value, holds, note in table:
        print(f"| {figure:<{width}} | {target:<6} | {value:8.2f} | {'yes' if holds else 'NO':<5} | {note} |")
    sys.exit(0 if all(r[3] for r in table) else 1)


if __name__ == "__main__":
    main()
