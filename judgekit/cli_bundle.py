"""``judgekit bundles`` and the bundle level of ``judgekit run`` (``--level bundle``): thin typer glue over
:mod:`judgekit.bundles`.

Registration: ``bundles`` is added by the lines at the end of ``judgekit/cli.py``::

    from judgekit.cli_bundle import bundles_cmd  # noqa: E402
    app.command("bundles")(bundles_cmd)

and ``run`` calls :func:`create_bundle_run` when ``--level bundle`` is given. Like every ``cli_*`` module it
imports only :mod:`judgekit.cli_common` of the CLI.
"""

from __future__ import annotations

from typing import Annotated

import typer

from judgekit.cli_common import DbOption, UsageError, emit, friendly_errors, lazy, transaction

bundles = lazy("judgekit.bundles")  # imported when a command runs (the CLI's start-up stays light)
CATEGORY_FIELD = "category"  # bundles.CATEGORY_FIELD, written out so `--help` need not import it (a test checks)


def create_bundle_run(db: str | None, *, spec, judge, dataset: str, rubric: str, from_run: str | None,
                      bundle_by: list[str] | None, category_field: str, name: str | None,
                      answer_only: dict[str, object]) -> str:
    """Validate the bundle-level options of ``judgekit run`` and store the run; returns its name."""
    given = [opt for opt, value in answer_only.items() if value]
    if given:
        raise UsageError(f"{given[0]} applies to per-answer runs, not to --level bundle")
    if not from_run:
        raise UsageError("--level bundle needs --from-run RUN (the per-answer run whose verdicts are the evidence)")
    if not bundle_by:
        raise UsageError("--level bundle needs --bundle-by FIELD (a metadata field; repeat it for several)")
    with transaction(db) as s:
        run = bundles.create_bundle_run(s, from_run=from_run, bundle_by=bundle_by, dataset=dataset, rubric=rubric,
                                        harness=spec, judge=judge, name=name, category_field=category_field)
        return run.name


def bundles_cmd(
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset whose answers are bundled.")],
    bundle_by: Annotated[
        list[str], typer.Option("--bundle-by", help="Metadata field to group by (repeat for several).")
    ],
    rubric: Annotated[str | None, typer.Option("--rubric", help="Show each bundle's K.O. rule from it.")] = None,
    from_run: Annotated[
        str | None, typer.Option("--from-run", help="Count each bundle's evidence lines in this per-answer run.")
    ] = None,
    category_field: Annotated[
        str, typer.Option("--category-field", help="Metadata field shown as an answer's category.")
    ] = CATEGORY_FIELD,
    fmt: Annotated[str, typer.Option("--format", help="table (default) or json (one object).")] = "table",
    db: DbOption = None,
) -> None:
    """Group a dataset's answers into bundles by metadata fields (stored on first use) and list them:
    size, categories, the K.O. rule of each (with --rubric), evidence lines (with --from-run)."""
    if fmt not in ("table", "json"):
        raise UsageError(f"--format must be table or json, not {fmt!r}")
    with transaction(db) as s:
        rows = bundles.list_bundles(s, dataset, bundle_by, rubric=rubric, from_run=from_run,
                                    category_field=category_field)
    emit(fmt, {"dataset": dataset, "bundle_by": list(bundle_by), "bundles": rows},
         lambda: bundles.render_bundles_table(rows))


bundles_cmd = friendly_errors(bundles_cmd)

__all__ = ["bundles_cmd", "create_bundle_run"]
