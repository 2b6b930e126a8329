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

import audit_calibration  # noqa: E402
import harness_bench  # noqa: E402
import import_bench  # noqa: E402
import pages_bench  # noqa: E402
import planner_bench  # noqa: E402
import prefix_cache_bench  # noqa: E402
import reply_bench  # noqa: E402
import startup_bench  # noqa: E402
import stats_bench  # noqa: E402
import team_load_bench  # noqa: E402


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


def rows_reply(r: dict) -> list[tuple]:
    return [
        ("worst-case reply parse, ~1 MB adversarial text (s)", "≤ 0.25 s", r["worst_parse_s"],
         r["worst_parse_s"] <= reply_bench.TARGET_PARSE_S,
         ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r["parse"].items())),
        ("longest event-loop stall while storing 10 MB replies (s)", "≤ 0.5 s", r["loop_stall_s"],
         r["loop_stall_s"] <= reply_bench.TARGET_STALL_S, ""),
        ("database growth per 10 MB reply (KB)", "≤ 150", r["db_bytes_per_call"] / 1024,
         r["db_bytes_per_call"] <= reply_bench.TARGET_BYTES_PER_CALL, "head + tail 64 KB, length, sha256"),
    ]


def rows_team(r: dict) -> list[tuple]:
    n, wrong = r["sessions"], r["lost"] + r["extra"] + r["different"] + r["duplicated_keys"] + r["unconfirmed"]
    return [
        (f"team server, {n} browser sessions on PostgreSQL: labels lost, extra, changed or unconfirmed", "= 0",
         wrong, wrong == 0 and not r["errors"],
         f"{r['labels_stored']} labels from {r['saves']} saves" + (f"; {len(r['errors'])} session errors"
                                                                 if r["errors"] else "")),
        (f"team server: label-save p95 with {n} sessions (s)", "≤ 2 s", r["save_p95"], r["save_p95"] <= 2.0,
         f"single user {r['single_save_p95']:.2f} s; p50 {r['save_p50']:.2f} s vs {r['single_save_p50']:.2f} s; "
         f"load average {r['loadavg_before']:.0f} on {r['cores']} cores"),
        (f"team server: page-render p95 with {n} sessions (s)", "≤ 5 s", r["render_p95"], r["render_p95"] <= 5.0,
         f"single user {r['single_render_p95']:.2f} s; p50 {r['render_p50']:.2f} s vs {r['single_render_p50']:.2f} s"),
        ("team server: peak memory of the server process (MB)", "≤ 1000", r["rss_peak_mb"], r["rss_peak_mb"] <= 1000,
         f"after the single user {r['rss_after_single_mb']:.0f} MB, first third of the load "
         f"{r['rss_first_third_max_mb']:.0f} MB, end {r['rss_end_mb']:.0f} MB"),
    ]


def rows_audit(r: dict) -> list[tuple]:
    """The audit's targets, each as the worst figure over the planted structures (each one beside it), and
    the share of printed 95 % interval kinds whose coverage lies in 93–97 %."""
    st = r["structures"]
    rows = []
    for key, label, target, ge in (
        ("induced_recall", "audit: induced recall (null pairs, single − split ≥ 0.15, 600 answers)", 0.80, True),
        ("null_called_real", "audit: null pairs called real", 0.05, False),
        ("induced_at_g0", "audit: pairs called induced at G = 0", 0.02, False),
        ("real_found", "audit: planted real pairs (|phi| ≥ 0.3) found, human n 40/80/150", 0.90, True),
    ):
        values = {name: s[key][0] for name, s in st.items()}
        worst = min(values.values()) if ge else max(values.values())
        holds = worst >= target if ge else worst <= target
        rows.append((label, f"{'≥' if ge else '≤'} {target:.2f}", worst, holds,
                     ", ".join(f"{n} {v:.3f}" for n, v in values.items())))
    kinds = [(name, kind, c) for name, s in st.items() for kind, (c, _, _) in s["cover"].items()
             if "identical verdicts" not in kind]
    inside = [k for k in kinds if audit_calibration.COVER_LO <= k[2] <= audit_calibration.COVER_HI]
    outside = sorted((k for k in kinds if k not in inside), key=lambda k: k[2])
    rows.append(("audit: printed 95% interval kinds covering 93–97 % (share)", "1.00", len(inside) / len(kinds),
                 not outside, "; ".join(f"{n}: {kind} {c:.3f}" for n, kind, c in outside[:4])))
    return rows


def rows_planner(r: dict) -> list[tuple]:
    ok = r["within_floor"] and r["dependent_cogrouped"] == 0
    return [
        ("planner's grouping vs split: calls saved (fresh run, demo matrix, T=0.5)", "≥ 0.40", r["calls_saved"],
         r["calls_saved"] >= 0.40 and ok,
         f"{r['recommended']}; prompt tokens −{r['prompt_tokens_saved']:.0%}; worst induced |Δphi| on the fresh "
         f"run {r['worst_fresh']:.2f} ({r['worst_pair']}); every co-grouped pair within the floor: "
         f"{'yes' if r['within_floor'] else 'NO'}; pulled pairs co-grouped: {r['dependent_cogrouped']}"),
        ("planner: every pair conditions every other (T=0) → split, with the reason", "split",
         float(r["uniform_split"]), r["uniform_split"], r["uniform_why"][:90]),
        ("planner: --budget calls=2 → least-distorting grouping within it", "yes", float(r["budget_ok"]),
         r["budget_ok"], f"{r['budget_spec']} (worst |Δphi| {r['budget_worst']:.2f})"),
    ]


BENCHES = {
    "harness": (harness_bench.run, rows_harness),
    "prefix": (prefix_cache_bench.run, rows_prefix),
    "stats": (stats_bench.run, rows_stats),
    "import": (import_bench.run, rows_import),
    "pages": (pages_bench.run, rows_pages),
    "startup": (startup_bench.run, rows_startup),
    "reply": (reply_bench.run, rows_reply),
    "team": (team_load_bench.run, rows_team),
    "audit": (lambda quick: audit_calibration.run(quick=quick, log=lambda m: print(m, flush=True)), rows_audit),
    "planner": (planner_bench.run, rows_planner),
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
