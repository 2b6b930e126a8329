"""``judgekit plan-groups`` and ``judgekit report health``: thin typer commands over :mod:`judgekit.planner`
and :mod:`judgekit.health` (registered at the end of ``judgekit/cli.py``).

Each opens one transaction, builds the report and prints it as text (default) or as exactly one JSON
object on stdout (``--format json``; NaN → ``null``). Bad arguments exit with status 2 and one line on
stderr through :func:`judgekit.cli_common.friendly_errors`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from judgekit.cli_common import Format, FormatOption, UsageError, emit, friendly_errors, transaction


def plan_groups_cmd(
    from_runs: Annotated[
        tuple[str, str],
        typer.Option("--from-runs", metavar="SINGLE SPLIT",
                     help="The pilot: a single run and a split run over the same answers."),
    ],
    budget: Annotated[
        str | None,
        typer.Option("--budget", help="calls=N (calls per answer) or usd=X (dollars for one run over the dataset)."),
    ] = None,
    fmt: FormatOption = Format.table,
    db: Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: $JUDGEKIT_DB_URL).")] = None,
) -> None:
    """Which criteria can share a call: the cheapest grouping whose co-grouped pairs show no induced
    association beyond the judge's noise floor, the trade-off curve, and the harness spec to run."""
    friendly_errors(_plan_groups)(list(from_runs), budget, fmt, db)


def _plan_groups(runs: list[str], budget: str | None, fmt: Format, db: str | None) -> None:
    from judgekit import planner

    with transaction(db) as s:
        plan = planner.plan_groups(s, runs[0], runs[1], budget=planner.parse_budget(budget))
    emit(fmt, plan.to_dict(), lambda: planner.render_plan(plan))


def health_cmd(
    run: Annotated[list[str], typer.Option("--run", help="A run (repeatable): one per harness to compare.")],
    human: Annotated[bool, typer.Option("--human", help="The human consensus (the default).")] = False,
    annotator: Annotated[str | None, typer.Option("--annotator", help="One annotator instead.")] = None,
    fmt: FormatOption = Format.table,
    db: Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: $JUDGEKIT_DB_URL).")] = None,
) -> None:
    """Criterion health: test–retest κ, judge-vs-judge κ across harnesses, judge-vs-human κ, prevalence,
    unsure labels, unscored verdicts; flags *ambiguous criterion — rewrite it* and *sensitive to call
    structure* with their evidence."""
    friendly_errors(_health)(run, human, annotator, fmt, db)


def _health(runs: list[str], human: bool, annotator: str | None, fmt: Format, db: str | None) -> None:
    from judgekit import health

    if human and annotator:
        raise UsageError("--human and --annotator together: choose one reference column")
    with transaction(db) as s:
        rep = health.health_report(s, runs, human=True, annotator=annotator)
    emit(fmt, rep.to_dict(), lambda: health.render_health_table(rep))
