"""A file cache of the numeric matrices reports are built from (a run's verdicts, a label tensor, an
example index), so a cold dashboard does not re-fetch millions of rows that have not changed.

Entries live under ``<home>/.cache/judgekit/<hash of the database URL>/`` as ``.npz`` files named by
kind, key and a *version* the caller derives cheaply from the store (e.g. the largest verdict id of a
run: verdicts are only ever inserted, so it moves exactly when they change). A stale or unreadable
entry is simply recomputed; the cache never decides what is true, the store does. Set
``JUDGEKIT_MATRIX_CACHE=0`` to turn it off.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgekit import config

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

Arrays = dict[str, "np.ndarray"]
Warmer = Callable[..., None]
_warmers: list[Warmer] = []


def _folder(db_url: str) -> Path:
    digest = hashlib.sha256(db_url.encode()).hexdigest()[:16]
    return config.home() / ".cache" / "judgekit" / digest


def enabled() -> bool:
    return os.environ.get("JUDGEKIT_MATRIX_CACHE", "1") != "0"


def cached(db_url: str, kind: str, key: str, version: str, compute: Callable[[], Arrays]) -> Arrays:
    """The arrays for (kind, key) at ``version``: from the cache file, or computed and stored."""
    import numpy as np  # here: importing this module (the write path does) stays light

    if not enabled():
        return compute()
    folder = _folder(db_url)
    safe_key = hashlib.sha256(key.encode()).hexdigest()[:16]
    safe_version = hashlib.sha256(version.encode()).hexdigest()[:16]
    path = folder / f"{kind}-{safe_key}-{safe_version}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as data:
                return {name: data[name] for name in data.files}
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
    arrays = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob(f"{kind}-{safe_key}-*.npz"):
            old.unlink(missing_ok=True)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as tmp:
            tmp.write(buf.getvalue())
        os.replace(tmp.name, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:
        pass  # a read-only home just means no cache
    return arrays


def warm_after_writes(warmer: Warmer) -> None:
    """Register ``warmer(session, run=…, dataset=…)`` to fill the cache after a write (a finished run, an
    import). The entry points (CLI, dashboard, notebook API, demo) register the loaders'
    ``sources.warm_cache``; the write path only calls :func:`written`, so it never imports the layers
    above it."""
    if warmer not in _warmers:
        _warmers.append(warmer)


def written(s: Any, *, run: str | int | None = None, dataset: str | None = None) -> None:
    """After a write: let every registered warmer fill the cache. Best effort — the cache is an
    optimisation, so a failure here never fails the write that triggered it."""
    for warmer in list(_warmers):
        try:
            warmer(s, run=run, dataset=dataset)
        except Exception:  # noqa: BLE001 - see the docstring
            continue
