"""The ``judgekit`` command line (typer). Thin: parse arguments, open a session, call the library.

Every command takes ``--db URL`` (default ``JUDGEKIT_DB_URL``, else ``sqlite:///db/judgekit.sqlite``).
A bad file or argument exits with status 2 and one line naming the file, line and field.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.orm import Session

from judgekit import store
from judgekit.datasets import InputError

app = typer.Typer(
    help="judgekit — judge meta-evaluation: run several LLM-judge harnesses over the same stored outputs, "
    "label a human column, and see which criterion associations are real.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLAlchemy URL (default: $JUDGEKIT_DB_URL, else sqlite:///db/judgekit.sqlite)."),
]


class UsageError(Exception):
    """A bad argument combination; shown as one line like an InputError."""


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def friendly_errors(fn: Callable) -> Callable:
    """Turn the library's expected errors into one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (InputError, store.NotFound, UsageError) as e:
            fail(str(e))
        except ValueError as e:
            fail(str(e))

    return wrapper


@contextlib.contextmanager
def transaction(db: str | None) -> Iterator[Session]:
    """One short transaction on the chosen database (migrated on first use)."""
    engine = store.engine_for(db)
    with Session(engine) as s, s.begin():
        yield s


def command(name: str | None = None, **kwargs) -> Callable:
    def register(fn: Callable) -> Callable:
        return app.command(name, **kwargs)(friendly_errors(fn))

    return register


# --------------------------------------------------------------------------- workspace


@command()
def init(db: DbOption = None) -> None:
    """Create or upgrade the database schema (a second run is a no-op)."""
    engine = store.engine_for(db, migrate=False)
    applied = store.upgrade(engine)
    where = engine.url.render_as_string(hide_password=True)
    typer.echo(f"{'migrated' if applied else 'up to date'}: {where} at revision {store.current_revision(engine)}")


@command()
def demo(
    examples: Annotated[int, typer.Option("--examples", min=10, max=200_000, help="Number of demo answers.")] = 600,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
    db: DbOption = None,
) -> None:
    """Load the demo workspace: dataset `demo`, rubrics `demo` (6 binary) and `demo-scale`, `reference` labels."""
    from judgekit import imports

    with transaction(db) as s:
        result = imports.load_demo(s, n_examples=examples, seed=seed)
    typer.echo(result.summary() if result else "the demo dataset is already loaded")


@command("import-dataset")
def import_dataset(
    path: Annotated[Path, typer.Argument(help="A .jsonl or .csv file: id and answer required.")],
    name: Annotated[str, typer.Option("--name", help="Dataset name.")],
    db: DbOption = None,
) -> None:
    """Import model outputs (id, question, context, answer; other fields become metadata)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_dataset(s, path, name).summary())


@command("import-rubric")
def import_rubric(
    path: Annotated[Path, typer.Argument(help="A .yaml/.yml or .json rubric.")], db: DbOption = None
) -> None:
    """Import a rubric: binary and 1–5 scale criteria, pass_at, optional ko_rule."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_rubric(s, path).summary())


@command("import-labels")
def import_labels(
    path: Annotated[Path, typer.Argument(help="Long JSONL/CSV (example_id, criterion, value, annotator) or wide CSV.")],
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset the labels belong to.")],
    annotator: Annotated[str | None, typer.Option(help="Annotator for rows that do not name one.")] = None,
    rubric: Annotated[str | None, typer.Option(help="Check criteria against this rubric only.")] = None,
    db: DbOption = None,
) -> None:
    """Import human labels (upserts on example × criterion × annotator)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_labels(s, path, dataset, annotator=annotator, rubric=rubric).summary())


@command("import-run")
def import_run(
    path: Annotated[Path, typer.Argument(help="JSONL/CSV of example_id, criterion, verdict[, rationale, p_pass].")],
    dataset: Annotated[str, typer.Option("--dataset")],
    rubric: Annotated[str, typer.Option("--rubric")],
    name: Annotated[str, typer.Option("--name", help="Name of the new run.")],
    db: DbOption = None,
) -> None:
    """Import verdicts produced elsewhere as a run (judge `imported`)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_run(s, path, dataset=dataset, rubric=rubric, name=name).summary())


@command("export-labels")
def export_labels(
    dataset: Annotated[str, typer.Option("--dataset")],
    out: Annotated[Path, typer.Option("--out", help="Output .jsonl (exact round-trip) or .csv.")],
    db: DbOption = None,
) -> None:
    """Export a dataset's labels (every annotator)."""
    from judgekit import imports

    with transaction(db) as s:
        n = imports.export_labels(s, dataset, out)
    typer.echo(f"exported {n} labels to {out}")


@command("list")
def list_cmd(db: DbOption = None) -> None:
    """List datasets, rubrics and runs."""
    with transaction(db) as s:
        for d in store.list_datasets(s):
            typer.echo(f"dataset  {d['name']:<24} {d['examples']} examples")
        for r in store.list_rubrics(s):
            ko = f"  K.O.: {r['ko_rule']}" if r["ko_rule"] else ""
            typer.echo(f"rubric   {r['name']:<24} {', '.join(r['criteria'])}{ko}")
        for r in store.list_runs(s):
            typer.echo(f"run {r['id']:<4} {r['name']:<24} {r['status']:<9} {r['harness']:<28} {r['judge']}  "
                       f"{r['scored']}/{r['verdicts']} scored")


@command("app")
def app_cmd(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1 = this machine only).")] = "127.0.0.1",
    db: DbOption = None,
) -> None:
    """Start the dashboard (Streamlit) on http://HOST:PORT."""
    import os
    import subprocess

    from judgekit import config

    env = dict(os.environ)
    if db:
        env["JUDGEKIT_DB_URL"] = db
    store.engine_for(db)  # migrate before the first page renders
    cmd = [sys.executable, "-m", "streamlit", "run", str(config.REPO_DIR / "app.py"),
           "--server.address", host, "--server.port", str(port), "--server.headless", "true",
           "--browser.gatherUsageStats", "false"]
    raise typer.Exit(subprocess.call(cmd, env=env))


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
