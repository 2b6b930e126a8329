"""judgekit — judge meta-evaluation. ``judgekit.open(url)`` opens a workspace for notebooks
(:mod:`judgekit.api`); the command line is :mod:`judgekit.cli`. Importing the package loads nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from judgekit.api import Workspace


def open(url: str | None = None) -> Workspace:  # noqa: A001 - judgekit.open(url), by design
    """The workspace at ``url`` (a SQLAlchemy URL; default ``$JUDGEKIT_DB_URL``): see :mod:`judgekit.api`."""
    from judgekit.api import open_workspace

    return open_workspace(url)
