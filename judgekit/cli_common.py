"""What every ``judgekit`` command module shares: options, one-line errors, transactions, lazy modules.

Start-up rule (``judgekit --help`` ≤ 0.35 s, see ``bench/startup_bench.py``): a command module imports
only the standard library, ``typer`` and this module at its top. The library modules it calls
(``store`` → SQLAlchemy, ``reports`` → numpy/scipy, ``runner`` → openai, …) are either imported inside the
command's body or named through :func:`lazy`, which imports them on first attribute access — so listing
the commands or showing ``--help`` never loads them. ``tests/test_cli_startup.py`` checks that
``import judgekit.cli`` loads none of the heavy packages.

Adding a command: write ``@command("name")`` (or ``@command()``) over a function in ``judgekit/cli.py``, or
in a new ``judgekit/cli_*.py`` module that imports only this module of the CLI and is registered at the
bottom of ``judgekit/cli.py`` (the sub-modules receive the app there; none imports ``judgekit.cli`` or a
sibling, so there is no import cycle to work around); use :data:`DbOption`, :func:`transaction`,
:func:`friendly_errors`, :func:`emit` and :func:`execute_run` from here.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.orm import Session


class LazyModule:
    """A module imported on first attribute access (``store = lazy("judgekit.store")``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name}>"


def lazy(name: str) -> Any:
    return LazyModule(name)


store = lazy("judgekit.store")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="SQLAlchemy URL (default: $JUDGEKIT_DB_URL, else sqlite:///db/judgekit.sqlite)."
    ),
]


class Format(enum.StrEnum):
    table = "table"
    json = "json"


FormatOption = Annotated[
    Format, typer.Option("--format", help="table (default) or json (one object, NaN → null).")
]


def command_group(help: str) -> typer.Typer:
    """A ``judgekit GROUP …`` sub-app with the CLI's settings (plain help, no completion, no rich tracebacks)."""
    return typer.Typer(help=help, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                       rich_markup_mode=None)


class UsageError(Exception):
    """A bad argument combination; shown as one line like an InputError."""


def fail(message: str) -> None:
    from judgekit import redact  # light: the standard library only

    typer.echo(f"error: {redact.scrub(message)}", err=True)
    raise typer.Exit(2)


def friendly_errors(fn: Callable) -> Callable:
    """Turn the library's expected errors into one line on stderr and exit status 2 (``InputError`` is a
    ``ValueError``; ``store.NotFound`` a ``LookupError`` — neither needs its module imported here)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (UsageError, ValueError) as e:
            fail(str(e))
        except LookupError as e:
            if type(e).__name__ != "NotFound":
                raise
            fail(str(e))

    return wrapper


def warm_reports_after_writes() -> None:
    """After a command's writes (an import, a finished run) the source loaders fill the matrix cache, so the
    dashboard's first render is quick: registered here, at the entry point, so that the write path
    itself never imports the loaders."""
    from judgekit import matrix_cache

    matrix_cache.warm_after_writes(_warm_reports)


def _warm_reports(s: Session, *, run: str | int | None = None, dataset: str | None = None) -> None:
    """``sources.warm_cache``, imported when a write happens: the loaders (numpy, scipy) stay out of a
    command's start-up — a run's first call does not wait for them."""
    from judgekit import sources

    sources.warm_cache(s, run=run, dataset=dataset)


@contextlib.contextmanager
def transaction(db: str | None) -> Iterator[Session]:
    """One short transaction on the chosen database (migrated on first use)."""
    from sqlalchemy.orm import Session

    warm_reports_after_writes()
    engine = store.engine_for(db)
    with Session(engine) as s, s.begin():
        yield s


def emit(fmt: str, payload: Any, table: Callable[[], str]) -> None:
    """Print a report: exactly one JSON value on stdout (NaN → null), or its table."""
    if fmt == "json":
        from judgekit.reports import jsonable

        typer.echo(json.dumps(jsonable(payload), ensure_ascii=False, allow_nan=False))
    else:
        typer.echo(table())


# --------------------------------------------------------------------------- judging


class ProgressLine:
    """A one-line progress bar on stderr for `run` and `resume`."""

    def __init__(self, total: int) -> None:
        self.total, self.last = total, 0.0

    def __call__(self, p) -> None:
        import time

        now = time.monotonic()
        if now - self.last < 0.2 and p.done_calls < p.total_calls:
            return
        self.last = now
        width = 30
        filled = int(width * p.fraction)
        rate = p.done_calls / p.elapsed_s if p.elapsed_s > 0 else 0.0
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {p.done_calls}/{p.total_calls} calls"
            f"  {rate:5.1f}/s  failed {p.failed_calls}  unscored {p.unscored}  retries {p.retries}  "
        )
        sys.stderr.flush()
        if p.done_calls >= p.total_calls:
            sys.stderr.write("\n")


def execute_run(
    db: str | None,
    run_ref: str,
    concurrency: int,
    breaker: int,
    *,
    use_batch: bool = False,
    poll_interval: float = 30.0,
) -> None:
    """Send a run's missing calls live, or through the OpenAI Batch API (also when a batch is under way):
    :func:`judgekit.continuation.continue_run_sync` with a progress line, a summary, and the exit status
    (130 interrupted, 1 not done). What ``judgekit run``, ``resume`` and ``critique`` call."""
    from judgekit import batch, client, continuation, lease, runner

    warm_reports_after_writes()
    engine = store.engine_for(db)
    batched = use_batch or continuation.is_batched(engine, run_ref)
    pending = 0 if batched else runner.count_pending(engine, run_ref)
    try:
        summary = continuation.continue_run_sync(
            engine,
            run_ref,
            use_batch=use_batch,
            concurrency=concurrency,
            breaker=breaker,
            poll_interval=poll_interval,
            progress=ProgressLine(pending) if pending else None,
            batch_progress=lambda st: typer.echo(
                f"batch {st.batch_id}: {st.status} {st.completed + st.failed}/{st.request_count}", err=True
            ),
        )
    except (batch.BatchError, client.JudgeConfigError, lease.LeaseHeld) as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:  # Ctrl-C while waiting on a batch (a live run handles it itself)
        typer.echo(f"interrupted; the batch goes on — `judgekit resume {run_ref}` picks it up", err=True)
        raise typer.Exit(130) from None
    print_summary(summary)
    if summary.status == "interrupted":
        raise typer.Exit(130)  # the shell's code for a Ctrl-C; the run is resumable
    if summary.status not in ("done",):
        raise typer.Exit(1)


def print_summary(summary) -> None:
    t = summary.totals
    lines = [
        f"run {summary.name} (#{summary.run_id}): {summary.status}"
        + (f" — {summary.message}" if summary.message else ""),
        f"  this session: {summary.calls_sent} calls sent, {summary.failed_calls} failed at the endpoint, "
        f"{summary.unscored} verdicts unscored",
        f"  run totals:   {t['calls']} calls, {t['retries']} retries, {t['failed_calls']} failed"
        + (f" ({t['rejected_calls']} rejected for good)" if t.get("rejected_calls") else "")
        + f", {t['unscored']} unscored verdicts, {t.get('cannot_assess', 0)} cannot assess",
        f"  tokens:       {t['prompt_tokens']} prompt ({t['cached_tokens']} cached), {t['completion_tokens']} "
        f"completion",
        f"  latency:      p50 {t['latency_p50']} s, p95 {t['latency_p95']} s",
    ]
    if t.get("cache_hits"):
        lines.append(
            f"  cache:        {t['cache_hits']} calls answered from the response cache — nothing sent, nothing "
            f"billed (they cost {t['saved_prompt_tokens']} prompt + {t['saved_completion_tokens']} completion "
            "tokens when first made)"
        )
    typer.echo("\n".join(lines))
