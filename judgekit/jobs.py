"""Background runs: execute a run in a worker thread so the page (or session) that started it can go.

The dashboard's Run page starts runs here; leaving the page does not stop them, because the worker
thread belongs to the Streamlit server process, not to a page script. Progress lives in the store
(verdicts and calls are written as they finish), so any page — or another process — can show it;
the registry adds the live counters and a cancel switch for the runs this process started.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import continuation, redact, runner, store


@dataclass
class Job:
    run_name: str
    db_url: str
    concurrency: int
    poll_interval: float = 30.0  # seconds between polls when the run continues as an OpenAI batch
    cancel: threading.Event = field(default_factory=threading.Event)
    state: str = "queued"  # queued | running | finished
    progress: runner.Progress | None = None
    summary: runner.RunSummary | None = None
    error: str | None = None

    @property
    def alive(self) -> bool:
        return self.state != "finished"

    def execute(self, breaker: int) -> None:
        """Continue the run as it was started (a batched run as a batch, never live: the continuation
        module decides), with this job's cancel switch and live counters."""
        self.state = "running"
        try:
            if not self.cancel.is_set():
                self.summary = continuation.continue_run_sync(
                    store.engine_for(self.db_url),
                    self.run_name,
                    concurrency=self.concurrency,
                    breaker=breaker,
                    cancel=self.cancel,
                    poll_interval=self.poll_interval,
                    progress=lambda p: setattr(self, "progress", p),
                )
        except Exception as exc:  # shown on the page; the run row keeps its last status
            self.error = redact.scrub(f"{type(exc).__name__}: {exc}")
        finally:
            self.state = "finished"


_jobs: dict[tuple[str, str], Job] = {}
_lock = threading.Lock()


def start(
    db_url: str, run_name: str, *, concurrency: int = 8, breaker: int = 10, poll_interval: float = 30.0
) -> Job:
    """Execute (or resume) a run in a daemon thread; a run already executing here is not started twice
    (and one executing in another process is refused by its lease: the job's error says so)."""
    return start_many(db_url, [run_name], concurrency=concurrency, breaker=breaker, poll_interval=poll_interval)[0]


def start_many(
    db_url: str,
    run_names: list[str],
    *,
    concurrency: int = 8,
    breaker: int = 10,
    sequential: bool = False,
    poll_interval: float = 30.0,
) -> list[Job]:
    """Start several runs: in parallel threads, or one after another in one thread (``sequential``) —
    for a judge that serves one request at a time, whose prefix cache parallel runs would thrash."""
    with _lock:
        jobs: list[Job] = []
        fresh: list[Job] = []
        for name in run_names:
            existing = _jobs.get((db_url, name))
            if existing is not None and existing.alive:
                jobs.append(existing)
                continue
            job = Job(run_name=name, db_url=db_url, concurrency=concurrency, poll_interval=poll_interval)
            _jobs[(db_url, name)] = job
            jobs.append(job)
            fresh.append(job)
        for group in [fresh] if sequential else [[j] for j in fresh]:
            if group:
                threading.Thread(
                    target=lambda g=group: [j.execute(breaker) for j in g],
                    name=f"judgekit-runs-{group[0].run_name}",
                    daemon=True,
                ).start()
    return jobs


def get(db_url: str, run_name: str) -> Job | None:
    return _jobs.get((db_url, run_name))


def active(db_url: str) -> list[Job]:
    return [j for (url, _), j in list(_jobs.items()) if url == db_url and j.alive]


def cancel(db_url: str, run_name: str) -> bool:
    job = _jobs.get((db_url, run_name))
    if job is None or not job.alive:
        return False
    job.cancel.set()
    return True


@dataclass(frozen=True)
class StoredProgress:
    """How far a run is, read from the store (works for runs executing in any process)."""

    expected: int
    verdicts: int
    scored: int
    calls: int
    failed_calls: int

    @property
    def fraction(self) -> float:
        return 1.0 if self.expected == 0 else min(1.0, self.verdicts / self.expected)


def stored_progress(s: Session, run: store.Run) -> StoredProgress:
    bundle_level = store.run_level(run) == "bundle"  # its units are bundles, its verdicts bundle verdicts
    unit = store.RunBundle if bundle_level else store.RunExample
    V = store.BundleVerdict if bundle_level else store.Verdict
    n_examples = s.scalar(select(func.count()).select_from(unit).where(unit.run_id == run.id))
    n_criteria = s.scalar(
        select(func.count())
        .select_from(store.CriterionRow)
        .where(store.CriterionRow.rubric_id == run.rubric_id)
    )
    if bundle_level:
        verdicts, scored = s.execute(select(func.count(), func.count(V.value)).where(V.run_id == run.id)).one()
    else:
        verdicts, scored, _ = store.verdict_counts(s, run.id)
    calls, failed = s.execute(
        select(func.count(), func.count().filter(store.Call.status == "error")).where(
            store.Call.run_id == run.id
        )
    ).one()
    expected = (n_examples or 0) * (n_criteria or 0)
    if run.status == "done":  # e.g. a critique run never asks checks that do not apply
        expected = verdicts
    return StoredProgress(expected, verdicts, scored, calls, failed or 0)
