"""Continue a run the way it was started: through the OpenAI Batch API if it was batched, else live.

Where this sits: above :mod:`judgekit.runner` (live calls) and :mod:`judgekit.batch` (Batch API), below
every entry point that starts or resumes a run — ``judgekit run`` / ``judgekit resume``, the dashboard's
Run page (Start and Resume, through :mod:`judgekit.jobs`) and the demo. The rule lives here and only
here: a run that has ever been sent as a batch continues as a batch (its live batch is polled and
imported; only what is still missing is submitted as a new batch) and never sends live calls for work a
batch holds; any other run sends its missing calls live. Both paths hold the run's lease.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from judgekit import batch, runner

__all__ = ["continue_run", "continue_run_sync", "is_batched"]


def is_batched(engine: Engine, run_ref: str | int) -> bool:
    """Whether the run has been sent through the Batch API (so it must continue as a batch)."""
    return batch.load_state(engine, run_ref) is not None


async def continue_run(
    engine: Engine,
    run_ref: str | int,
    *,
    use_batch: bool = False,
    concurrency: int = 8,
    breaker: int = 10,
    cancel: threading.Event | None = None,
    progress: Callable[[runner.Progress], None] | None = None,
    batch_progress: Callable[[batch.BatchState], None] | None = None,
    poll_interval: float = 30.0,
    lease_wait_s: float = 0.0,
    client: Any = None,
) -> runner.RunSummary:
    """Send a run's missing work: as a batch when ``use_batch`` or when the run was batched before, else live.

    Raises :class:`judgekit.lease.LeaseHeld` when another process is executing the run.
    """
    if use_batch or is_batched(engine, run_ref):
        return await batch.run_batch(
            engine, run_ref, interval_s=poll_interval, progress=batch_progress, client=client,
            lease_wait_s=lease_wait_s, cancel=cancel,
        )
    return await runner.execute(
        engine, run_ref, concurrency=concurrency, breaker=breaker, cancel=cancel, progress=progress,
        client=client, lease_wait_s=lease_wait_s,
    )


def continue_run_sync(engine: Engine, run_ref: str | int, **kwargs: Any) -> runner.RunSummary:
    """:func:`continue_run` from synchronous code (the CLI, the dashboard's worker threads, the demo)."""
    return asyncio.run(continue_run(engine, run_ref, **kwargs))
