"""``judgekit report …`` and ``judgekit export-report``: thin typer commands over :mod:`judgekit.reports`.

Each command opens one transaction, builds a report object and prints it as a table (default) or as
exactly one JSON value on stdout (``--format json``; NaN → ``null``). Bad arguments and unknown
names exit with status 2 and one line on stderr, through :func:`judgekit.cli_common.friendly_errors`.

Registered in ``judgekit/cli.py`` (see the bottom of this file); like every ``cli_*`` module it imports only
:mod:`judgekit.cli_common` of the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from judgekit.cli_common import DbOption, Format, FormatOption, UsageError, emit, friendly_errors, lazy, transaction

reports, store = lazy("judgekit.reports"), lazy("judgekit.store")  # imported when a command runs

report_app = typer.Typer(
    help="Reports over stored runs and labels: crosstab, phi (+ audit), compare, agreement, runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


RunsOption = Annotated[list[str] | None, typer.Option("--run", help="Run name or id (repeatable).")]
HumanOption = Annotated[
    bool,
    typer.Option(
        "--human", help="The human column: majority of all annotators except `reference` (ties → none)."
    ),
]
DatasetOption = Annotated[
    str | None,
    typer.Option("--dataset", help="Dataset (needed for --human/--annotator without --run if several)."),
]


def _command(name: str) -> Callable:
    """Register on ``report_app`` behind the CLI's one-line error handling (resolved at call time)."""

    def register(fn: Callable) -> Callable:
        return report_app.command(name)(friendly_errors(fn))

    return register


@_command("crosstab")
def crosstab(
    row: Annotated[str, typer.Option("--row", help="Criterion key for the rows (e.g. cites_source).")],
    col: Annotated[str, typer.Option("--col", help="Criterion key for the columns (e.g. answers_question).")],
    run: Annotated[str | None, typer.Option("--run", help="Run name or id.")] = None,
    human: HumanOption = False,
    annotator: Annotated[str | None, typer.Option("--annotator", help="One annotator's labels.")] = None,
    dataset: DatasetOption = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Cross-tabulate two criteria under one source: counts, row totals, column failure rate per row,
    ratio, phi, and the example ids in each cell (JSON)."""
    chosen = [name for name, on in (("--run", run), ("--human", human), ("--annotator", annotator)) if on]
    if len(chosen) != 1:
        raise UsageError(
            "choose exactly one source: --run NAME, --human or --annotator NAME"
            + (f" (got {' and '.join(chosen)} together)" if chosen else "")
        )
    with transaction(db) as s:
        src = reports.load_sources(
            s, [run] if run else [], human=human, annotators=[annotator] if annotator else [], dataset=dataset
        )[0]
        rep = reports.crosstab_report(src, row, col)
    emit(fmt, rep.to_dict(), lambda: reports.render_crosstab_table(rep))


@_command("phi")
def phi(
    run: RunsOption = None,
    human: HumanOption = False,
    annotator: Annotated[
        list[str] | None, typer.Option("--annotator", help="An annotator column (repeatable).")
    ] = None,
    dataset: DatasetOption = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Posterior draws for the 95% intervals.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the posterior draws.")] = 0,
    reference: Annotated[str | None, typer.Option(
        "--reference", help="The run the others are compared with (default: the least-conditioned: split "
        "before grouped before single).")] = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Phi matrix per source with 95% intervals, and the association audit: real / induced by a harness /
    distorted by a harness / none / undecided (with how many more labels would decide it)."""
    from judgekit import noise

    with transaction(db) as s:
        sources = reports.load_sources(s, run or [], human=human, annotators=annotator or [], dataset=dataset)
        rep = reports.phi_report(sources, n_boot=n_boot, seed=seed, reference=reference,
                                 noise_floor=noise.find_floor(s, sources))
    emit(fmt, rep.to_dict(), lambda: reports.render_phi_table(rep))


@_command("compare")
def compare(
    run_a: Annotated[str, typer.Argument(help="Run A (e.g. the single-call harness).")],
    run_b: Annotated[str, typer.Argument(help="Run B (e.g. the split harness).")],
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Flips per criterion (McNemar), failure attribution, all-pass rate and cost of two runs."""
    from judgekit import noise

    with transaction(db) as s:
        rep = reports.compare_runs(s, run_a, run_b)
        floor = noise.flips_beside_floor(s, run_a, run_b)
    emit(fmt, {**rep.to_dict(), "noise_floor": floor.to_dict()},
          lambda: reports.render_compare_table(rep) + "\n\n" + noise.render_floor_comparison(floor))


@_command("agreement")
def agreement(
    run: Annotated[str, typer.Option("--run", help="The judge run.")],
    annotator: Annotated[str | None, typer.Option("--annotator", help="Compare with one annotator.")] = None,
    human: HumanOption = False,
    vs_run: Annotated[str | None, typer.Option("--vs-run", help="Compare with another run instead.")] = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Judge vs human per criterion: accuracy, κ with CI, TPR/TNR (fail = positive), prevalence, AUC;
    scale criteria also mean |Δ|, weighted κ, Spearman. Default human column: the consensus."""
    chosen = [
        name for name, on in (("--annotator", annotator), ("--human", human), ("--vs-run", vs_run)) if on
    ]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} together: choose one reference column")
    with transaction(db) as s:
        rep = reports.agreement_for(s, run, annotator=annotator, vs_run=vs_run)
        floor = None
        if vs_run:
            from judgekit import noise

            floor = noise.flips_beside_floor(s, vs_run, run)
    if floor is None:
        emit(fmt, rep.to_dict(), lambda: reports.render_agreement_table(rep))
    else:
        from judgekit import noise

        emit(fmt, {**rep.to_dict(), "noise_floor": floor.to_dict()},
              lambda: reports.render_agreement_table(rep) + "\n\n" + noise.render_floor_comparison(floor))


@_command("runs")
def runs(
    dataset: Annotated[str | None, typer.Option("--dataset", help="Only this dataset's runs.")] = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """List runs: status, harness, judge, scored/total verdicts."""
    with transaction(db) as s:
        rows = reports.runs_report(s, dataset)
    emit(fmt, rows, lambda: reports.render_runs_table(rows))


def export_report_cmd(
    out: Annotated[Path, typer.Option("--out", help="FILE.html (plotly figures inline) or FILE.md.")],
    run: RunsOption = None,
    human: Annotated[
        bool, typer.Option("--human/--no-human", help="Include the human column if labelled.")
    ] = True,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Default: the dataset with the most runs.")
    ] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Posterior draws for the 95% intervals.")] = 1000,
    db: DbOption = None,
) -> None:
    """Write a self-contained report: crosstabs of the most-shifted pairs, phi heatmaps with the human
    column, the association audit, compare and agreement tables."""
    friendly_errors(_export_report)(out, run, human, dataset, n_boot, db)


def _export_report(out: Path, run, human: bool, dataset, n_boot: int, db) -> None:
    suffix = out.suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".markdown"):
        raise UsageError(f"{out}: --out must end in .html or .md")
    from judgekit import health

    with transaction(db) as s:
        rep = reports.build_report(s, run or None, human=human, dataset=dataset, n_boot=n_boot,
                                   sections=health.export_sections)
    if suffix in (".md", ".markdown"):
        text = reports.render_markdown(rep)
    else:
        from judgekit import figures  # pandas and plotly: only for the HTML page

        text = figures.render_html(rep)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {out} ({len(rep.sources)} sources, dataset {rep.dataset})")


# Registration — the exact lines at the end of judgekit/cli.py, just before `def main`:
#
#     from judgekit.cli_report import export_report_cmd, report_app  # noqa: E402
#     app.add_typer(report_app, name="report")
#     app.command("export-report")(export_report_cmd)
