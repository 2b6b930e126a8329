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

import numpy as np

from judgekit import config

Arrays = dict[str, np.ndarray]


def _folder(db_url: str) -> Path:
    digest = hashlib.sha256(db_url.encode()).hexdigest()[:16]
    return config.home() / ".cache" / "judgekit" / digest


def enabled() -> bool:
    return os.environ.get("JUDGEKIT_MATRIX_CACHE", "1") != "0"


def cached(db_url: str, kind: str, key: str, version: str, compute: Callable[[], Arrays]) -> Arrays:
    """The arrays for (kind, key) at ``version``: from the cache file, or computed and stored."""
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
