"""``judgekit label-set create|list``: thin typer commands over :mod:`judgekit.labeling`.

A bad argument (unknown strategy, a missing --run for ``cell``, an option that does not apply, an empty
cell) exits with status 2 and one line on stderr, and nothing is written: the sample is drawn and
validated inside the transaction before the label set row exists.

``judgekit.cli`` imports this module at its bottom; the CLI's helpers are looked up when a command runs,
so either module may be imported first.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable
from typing import Annotated

import typer

label_set_app = typer.Typer(
    help="Label sets: named, seeded samples of examples to hand-label (random, a cross-tab cell, or where "
    "two runs disagree).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLAlchemy URL (default: $JUDGEKIT_DB_URL, else sqlite:///db/judgekit.sqlite)."),
]


class Format(enum.StrEnum):
    table = "table"
    json = "json"


def _command(name: str) -> Callable:
    """Register on ``label_set_app`` behind the CLI's one-line error handling (resolved at call time)."""

    def register(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            from judgekit.cli import friendly_errors

            return friendly_errors(fn)(*args, **kwargs)

        return label_set_app.command(name)(wrapper)

    return register


def _transaction(db: str | None):
    from judgekit.cli import transaction

    return transaction(db)


@_command("create")
def create(
    name: Annotated[str, typer.Argument(help="Name of the new label set.")],
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset to sample from.")],
    rubric: Annotated[str, typer.Option("--rubric", help="Rubric whose criteria annotators label.")],
    strategy: Annotated[str, typer.Option("--strategy", help="random | cell | disagree")] = "random",
    size: Annotated[int, typer.Option("--size", help="Number of examples (a smaller pool: all of it).")] = 60,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed (same seed, same sample).")] = 0,
    run: Annotated[str | None, typer.Option("--run", help="cell: the run whose cross-tab is used.")] = None,
    row: Annotated[str | None, typer.Option("--row", help="cell: row criterion.")] = None,
    col: Annotated[str | None, typer.Option("--col", help="cell: column criterion.")] = None,
    cell: Annotated[str | None, typer.Option(
        "--cell", help="cell: ROW/COL outcomes, e.g. fail/pass (default: equal numbers from all four cells); "
        "disagree: A/B outcomes, fail/pass or pass/fail (default: both).")] = None,
    run_a: Annotated[str | None, typer.Option("--run-a", help="disagree: run A.")] = None,
    run_b: Annotated[str | None, typer.Option("--run-b", help="disagree: run B.")] = None,
    criterion: Annotated[str | None, typer.Option("--criterion", help="disagree: the criterion.")] = None,
    db: DbOption = None,
) -> None:
    """Draw a seeded sample of examples and store it as a label set."""
    from judgekit import labeling

    spec = labeling.SampleSpec(strategy=strategy, size=size, seed=seed, run=run, row=row, col=col,  # type: ignore[arg-type]
                               cell=cell, run_a=run_a, run_b=run_b, criterion=criterion)
    with _transaction(db) as s:
        info = labeling.create_label_set(s, name, dataset=dataset, rubric=rubric, spec=spec)
    st = info.strategy
    strata = ", ".join(f"{k} {v}" for k, v in st.get("strata", {}).items())
    typer.echo(f"created label set {info.name!r}: {info.size} examples of {info.dataset} "
               f"({st['description']}; pool {st['pool']}; {strata}), rubric {info.rubric}")


@_command("list")
def list_cmd(
    fmt: Annotated[Format, typer.Option("--format", help="table or json (one object).")] = Format.table,
    db: DbOption = None,
) -> None:
    """List label sets with their size and each annotator's progress."""
    from judgekit import labeling

    with _transaction(db) as s:
        rows = labeling.list_label_sets(s)
    if fmt == Format.json:
        payload = [{**r, "created_at": r["created_at"].isoformat()} for r in rows]
        typer.echo(json.dumps({"label_sets": payload}, ensure_ascii=False))
        return
    if not rows:
        typer.echo("no label sets (create one with `judgekit label-set create NAME --dataset D --rubric R`)")
        return
    for r in rows:
        done = ", ".join(f"{a} {n}/{r['size']}" for a, n in r["labelled"].items()) or "not started"
        typer.echo(f"{r['id']:<4} {r['name']:<24} {r['dataset']}×{r['rubric']:<12} {r['size']:>5}  "
                   f"{r['description']} (seed {r['seed']})  labelled: {done}")


# Registered at the bottom of judgekit/cli.py (before ``def main``) with:
# from judgekit.cli_label import label_set_app  # noqa: E402
# app.add_typer(label_set_app, name="label-set")
