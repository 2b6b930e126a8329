"""What every ``judgekit`` command module shares: options, one-line errors, transactions, lazy modules.

Start-up rule (``judgekit --help`` ≤ 0.35 s, see ``bench/startup_bench.py``): a command module imports
only the standard library, ``typer`` and this module at its top. The library modules it calls
(``store`` → SQLAlchemy, ``reports`` → numpy/scipy, ``runner`` → openai, …) are either imported inside the
command's body or named through :func:`lazy`, which imports them on first attribute access — so listing
the commands or showing ``--help`` never loads them. ``tests/test_cli_startup.py`` checks that
``import judgekit.cli`` loads none of the heavy packages.

Adding a command: write ``@command("name")`` (or ``@command()``) over a function in ``judgekit/cli.py``, or
in a new ``judgekit/cli_*.py`` module that is imported at the bottom of ``judgekit/cli.py``; use
:data:`DbOption` and :func:`transaction` from here.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import json
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


class UsageError(Exception):
    """A bad argument combination; shown as one line like an InputError."""


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
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


@contextlib.contextmanager
def transaction(db: str | None) -> Iterator[Session]:
    """One short transaction on the chosen database (migrated on first use)."""
    from sqlalchemy.orm import Session

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
