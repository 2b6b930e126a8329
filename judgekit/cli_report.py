"""``judgekit report …`` and ``judgekit export-report``: thin typer commands over :mod:`judgekit.reports`.

Each command opens one transaction, builds a report object and prints it as a table (default) or as
exactly one JSON value on stdout (``--format json``; NaN → ``null``). Bad arguments and unknown
names exit with status 2 and one line on stderr, through :func:`judgekit.cli.friendly_errors`.

Registered in ``judgekit/cli.py`` (see the bottom of this file). ``judgekit.cli`` is imported at the
*bottom* of this module and only looked up when a command runs, so either module may be imported first.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from judgekit.cli_common import lazy

reports, store = lazy("judgekit.reports"), lazy("judgekit.store")  # imported when a command runs

report_app = typer.Typer(
    help="Reports over stored runs and labels: crosstab, phi (+ audit), compare, agreement, runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class Format(enum.StrEnum):
    table = "table"
    json = "json"


FormatOption = Annotated[
    Format, typer.Option("--format", help="table (default) or json (one object, NaN → null).")
]
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
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            from judgekit.cli import friendly_errors

            return friendly_errors(fn)(*args, **kwargs)

        return report_app.command(name)(wrapper)

    return register


def _emit(fmt: Format, payload, table: Callable[[], str]) -> None:
    if fmt == Format.json:
        typer.echo(json.dumps(reports.jsonable(payload), ensure_ascii=False, allow_nan=False))
    else:
        typer.echo(table())


def _usage(message: str) -> Exception:
    from judgekit.cli import UsageError

    return UsageError(message)


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
        raise _usage(
            "choose exactly one source: --run NAME, --human or --annotator NAME"
            + (f" (got {' and '.join(chosen)} together)" if chosen else "")
        )
    with transaction(db) as s:
        src = reports.load_sources(
            s, [run] if run else [], human=human, annotators=[annotator] if annotator else [], dataset=dataset
        )[0]
        rep = reports.crosstab_report(src, row, col)
    _emit(fmt, rep.to_dict(), lambda: reports.render_crosstab_table(rep))


@_command("phi")
def phi(
    run: RunsOption = None,
    human: HumanOption = False,
    annotator: Annotated[
        list[str] | None, typer.Option("--annotator", help="An annotator column (repeatable).")
    ] = None,
    dataset: DatasetOption = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Bootstrap replicates for the CIs.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Phi matrix per source with bootstrap CIs, and the association audit (real / induced / undecided)."""
    with transaction(db) as s:
        sources = reports.load_sources(s, run or [], human=human, annotators=annotator or [], dataset=dataset)
        rep = reports.phi_report(sources, n_boot=n_boot, seed=seed)
    _emit(fmt, rep.to_dict(), lambda: reports.render_phi_table(rep))


@_command("compare")
def compare(
    run_a: Annotated[str, typer.Argument(help="Run A (e.g. the single-call harness).")],
    run_b: Annotated[str, typer.Argument(help="Run B (e.g. the split harness).")],
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """Flips per criterion (McNemar), failure attribution, all-pass rate and cost of two runs."""
    with transaction(db) as s:
        rep = reports.compare_runs(s, run_a, run_b)
    _emit(fmt, rep.to_dict(), lambda: reports.render_compare_table(rep))


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
        raise _usage(f"{' and '.join(chosen)} together: choose one reference column")
    with transaction(db) as s:
        rep = reports.agreement_for(s, run, annotator=annotator, vs_run=vs_run)
    _emit(fmt, rep.to_dict(), lambda: reports.render_agreement_table(rep))


@_command("runs")
def runs(
    dataset: Annotated[str | None, typer.Option("--dataset", help="Only this dataset's runs.")] = None,
    fmt: FormatOption = Format.table,
    db: DbOption = None,
) -> None:
    """List runs: status, harness, judge, scored/total verdicts."""
    with transaction(db) as s:
        rows = reports.runs_report(s, dataset)
    _emit(fmt, rows, lambda: reports.render_runs_table(rows))


def export_report_cmd(
    out: Annotated[Path, typer.Option("--out", help="FILE.html (plotly figures inline) or FILE.md.")],
    run: RunsOption = None,
    human: Annotated[
        bool, typer.Option("--human/--no-human", help="Include the human column if labelled.")
    ] = True,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Default: the dataset with the most runs.")
    ] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Bootstrap replicates for the CIs.")] = 1000,
    db: DbOption = None,
) -> None:
    """Write a self-contained report: crosstabs of the most-shifted pairs, phi heatmaps with the human
    column, the association audit, compare and agreement tables."""
    from judgekit.cli import friendly_errors

    friendly_errors(_export_report)(out, run, human, dataset, n_boot, db)


def _export_report(out: Path, run, human: bool, dataset, n_boot: int, db) -> None:
    suffix = out.suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".markdown"):
        raise _usage(f"{out}: --out must end in .html or .md")
    with transaction(db) as s:
        rep = reports.build_report(s, run or None, human=human, dataset=dataset, n_boot=n_boot)
    text = reports.render_markdown(rep) if suffix in (".md", ".markdown") else reports.render_html(rep)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {out} ({len(rep.sources)} sources, dataset {rep.dataset})")


# Imported last so that `judgekit.cli` (which registers this module's commands at its end) can be
# imported before or after this module. Typer reads the annotations above only when the app runs.
from judgekit.cli import DbOption, transaction  # noqa: E402

# Registration — the exact lines at the end of judgekit/cli.py, just before `def main`:
#
#     from judgekit.cli_report import export_report_cmd, report_app  # noqa: E402
#     app.add_typer(report_app, name="report")
#     app.command("export-report")(export_report_cmd)
