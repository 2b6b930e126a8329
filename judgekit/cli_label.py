"""``judgekit label-set create|list``: thin typer commands over :mod:`judgekit.labeling`.

A bad argument (unknown strategy, a missing --run for ``cell``, an option that does not apply, an empty
cell) exits with status 2 and one line on stderr, and nothing is written: the sample is drawn and
validated inside the transaction before the label set row exists.

Registered at the bottom of ``judgekit/cli.py``; like every ``cli_*`` module it imports only
:mod:`judgekit.cli_common` of the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated

import typer

from judgekit.cli_common import DbOption, Format, friendly_errors, transaction

label_set_app = typer.Typer(
    help="Label sets: named, seeded samples of examples to hand-label (random, a cross-tab cell, where "
    "two runs disagree, or the answers that would decide the audit's undecided pairs).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

def _command(name: str) -> Callable:
    """Register on ``label_set_app`` behind the CLI's one-line error handling (resolved at call time)."""

    def register(fn: Callable) -> Callable:
        return label_set_app.command(name)(friendly_errors(fn))

    return register


@_command("create")
def create(
    name: Annotated[str, typer.Argument(help="Name of the new label set.")],
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset to sample from.")],
    rubric: Annotated[str, typer.Option("--rubric", help="Rubric whose criteria annotators label.")],
    strategy: Annotated[str, typer.Option("--strategy", help="random | cell | disagree | decide")] = "random",
    size: Annotated[int, typer.Option("--size", help="Number of examples (a smaller pool: all of it).")] = 60,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed (same seed, same sample).")] = 0,
    run: Annotated[list[str] | None, typer.Option(
        "--run", help="cell: the run whose cross-tab is used; decide: the runs to audit (repeatable; default: "
        "every run of the dataset).")] = None,
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

    runs = tuple(run or ())
    if strategy != "decide" and len(runs) > 1:
        raise ValueError(f"--strategy {strategy} takes one --run, got {len(runs)}")
    one = runs[0] if runs and strategy != "decide" else None
    spec = labeling.SampleSpec(strategy=strategy, size=size, seed=seed, run=one, row=row, col=col,  # type: ignore[arg-type]
                               cell=cell, run_a=run_a, run_b=run_b, criterion=criterion,
                               runs=runs if strategy == "decide" else ())
    with transaction(db) as s:
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

    with transaction(db) as s:
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
