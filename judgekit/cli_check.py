"""``judgekit check``: CI gates over a stored run (thin typer command over :mod:`judgekit.gates`).

Exit status: 0 when every gate holds, 1 when one fails (the summary on stdout says which and by how
much), 2 for a bad argument or file (one line on stderr, nothing written).

Registered at the bottom of ``judgekit/cli.py``::

    from judgekit.cli_check import check_cmd  # noqa: E402
    app.command("check")(check_cmd)
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from judgekit.cli_common import DbOption, Format, FormatOption, UsageError, emit, friendly_errors, transaction


@friendly_errors
def check_cmd(
    run: Annotated[str, typer.Option("--run", help="The run to gate (name or id).")],
    human: Annotated[
        bool, typer.Option("--human", help="Reference: the human consensus (the default).")
    ] = False,
    annotator: Annotated[str | None, typer.Option("--annotator", help="Reference: one annotator.")] = None,
    min_kappa: Annotated[
        float | None, typer.Option("--min-kappa", help="Every criterion's κ vs the reference ≥ X.")
    ] = None,
    kappa_bound: Annotated[
        str | None, typer.Option("--kappa-bound", help="estimate (default) | lower: gate κ's 95% lower bound.")
    ] = None,
    max_induced: Annotated[
        int | None,
        typer.Option("--max-induced", min=0, help="At most N criterion pairs whose association the run induced."),
    ] = None,
    max_flip_rate: Annotated[
        float | None,
        typer.Option("--max-flip-rate", help="Per criterion, at most this share of verdicts differs from --baseline."),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="The run this one replaces (for --max-flip-rate).")
    ] = None,
    audit_run: Annotated[
        list[str] | None,
        typer.Option("--audit-run", help="Another run the association audit compares with, e.g. the split "
                     "harness (repeatable; the baseline is included)."),
    ] = None,
    gates_file: Annotated[
        Path | None,
        typer.Option("--gates", help="YAML thresholds (min_kappa, max_induced, max_flip_rate, baseline, "
                     "kappa_bound, criteria: {KEY: {min_kappa: X}}); options given here win."),
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML: one test case per criterion and gate.")
    ] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Bootstrap replicates for the audit's CIs.")] = 1000,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Gate a run for CI: κ with the humans, induced associations, flips against a baseline run; exit 0
    when every gate holds, 1 when one fails."""
    from judgekit import gates as gates_mod

    if human and annotator:
        raise UsageError("--human and --annotator together: choose one reference column")
    if kappa_bound not in (None, "estimate", "lower"):
        raise UsageError(f"--kappa-bound must be estimate or lower, not {kappa_bound!r}")
    for name, value, lo, hi in (("--min-kappa", min_kappa, -1, 1), ("--max-flip-rate", max_flip_rate, 0, 1)):
        if value is not None and not lo <= value <= hi:
            raise UsageError(f"{name} must be within {lo}..{hi}, not {value}")
    base = gates_mod.load_gates(gates_file) if gates_file else gates_mod.Gates()
    gates = base.with_overrides(min_kappa=min_kappa, max_induced=max_induced, max_flip_rate=max_flip_rate,
                                baseline=baseline, kappa_bound=kappa_bound,
                                audit_runs=tuple(audit_run) if audit_run else None)
    gates_mod.validate(gates)
    with transaction(db) as s:
        rep = gates_mod.check(s, run, gates, annotator=annotator, n_boot=n_boot)
    if junit:
        junit.parent.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
        junit.write_text(gates_mod.junit_xml(rep, stamp), encoding="utf-8")
    emit(fmt, rep.to_dict(), lambda: gates_mod.render_check(rep))
    if not rep.ok:
        raise typer.Exit(1)
