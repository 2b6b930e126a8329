"""Run leases: one process at a time sends a run's calls (SQLite and PostgreSQL alike).

Where this sits: between the store and execution. :func:`judgekit.runner.execute` and
:func:`judgekit.batch.run_batch` hold a run's lease for as long as they work on it, so two ``judgekit
resume`` processes — or a CLI resume and the dashboard's Resume — never both send the same calls.

The lease is a row in ``run_leases`` (one per run: owner, host, pid, heartbeat). Taking it is one
``INSERT``; taking over a stale one is a compare-and-swap ``UPDATE … WHERE owner = <the stale owner>``,
so of two processes racing for it exactly one wins on either database. The holder refreshes the
heartbeat every ``ttl_s / 4`` seconds from a thread; a lease is stale when its heartbeat is older than
``ttl_s`` (a process on another machine that died), or at once when its owner ran on this machine and
that process no longer exists (a SIGKILLed ``resume``). A holder whose heartbeat finds the lease gone
(another process took it over after a long stall) is told through :attr:`Lease.lost` and stops.

The second process refuses with :class:`LeaseHeld` — a message naming the holder and how to proceed —
or, given ``wait_s``, waits for the lease up to that long.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from judgekit import store

__all__ = ["DEFAULT_TTL_S", "Lease", "LeaseHeld", "acquire", "executing"]

DEFAULT_TTL_S = 60.0
Clock = Callable[[], dt.datetime]


class LeaseHeld(RuntimeError):
    """Another live process is executing the run; ``str()`` is the one line to show."""


def _pid_alive(pid: int) -> bool:
    """Whether a process of this machine still runs (a zombie — killed, not yet reaped — does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Lease:
    """A held run lease; :meth:`release` (or leaving the ``with`` block) gives it back."""

    def __init__(self, engine: Engine, run_id: int, owner: str, ttl_s: float, clock: Clock) -> None:
        self.engine, self.run_id, self.owner, self.ttl_s, self.clock = engine, run_id, owner, ttl_s, clock
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start_heartbeat(self) -> Lease:
        self._thread = threading.Thread(target=self._beat, name=f"judgekit-lease-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def heartbeat(self) -> bool:
        """Refresh the heartbeat; ``False`` (and :attr:`lost` set) if this process no longer holds the lease."""
        with Session(self.engine) as s, s.begin():
            updated = s.execute(
                update(store.RunLease)
                .where(store.RunLease.run_id == self.run_id, store.RunLease.owner == self.owner)
                .values(heartbeat_at=self.clock())
            ).rowcount
        if not updated:
            self.lost.set()
        return bool(updated)

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                if not self.heartbeat():
                    return
            except Exception:  # noqa: BLE001 - a database hiccup: try again at the next beat
                continue

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with Session(self.engine) as s, s.begin():
            s.execute(
                delete(store.RunLease).where(store.RunLease.run_id == self.run_id, store.RunLease.owner == self.owner)
            )

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _stale(row: store.RunLease, now: dt.datetime, ttl_s: float, host: str) -> bool:
    if (now - row.heartbeat_at).total_seconds() > ttl_s:
        return True
    return row.host == host and row.pid is not None and not _pid_alive(row.pid)


def _holder_text(row: store.RunLease, now: dt.datetime) -> str:
    age = max(0.0, (now - row.heartbeat_at).total_seconds())
    return f"pid {row.pid} on {row.host}, last heartbeat {age:.0f} s ago"


def executing(s: Session, run_id: int, *, ttl_s: float = DEFAULT_TTL_S, clock: Clock = store.utcnow) -> str | None:
    """Which live process is executing the run (``"pid … on …, last heartbeat … s ago"``), or None."""
    row = s.get(store.RunLease, run_id)
    now = clock()
    if row is None or _stale(row, now, ttl_s, socket.gethostname()[:200]):
        return None
    return _holder_text(row, now)


def _held_message(run_name: str, row: store.RunLease, now: dt.datetime, ttl_s: float) -> str:
    return (
        f"run {run_name!r} is being executed by another process ({_holder_text(row, now)}); it was not started "
        "twice. Wait for that process to finish, or stop it and resume "
        f"again (a lease whose process died is taken over at once on the same machine, after {ttl_s:.0f} s "
        "from another)."
    )


def _try_take(engine: Engine, run_id: int, owner: str, host: str, ttl_s: float, clock: Clock) -> store.RunLease | None:
    """Take the lease if free or stale; else the current holder's row."""
    now = clock()
    values = {"owner": owner, "host": host, "pid": os.getpid(), "acquired_at": now, "heartbeat_at": now}
    try:
        with Session(engine) as s, s.begin():
            s.execute(insert(store.RunLease).values(run_id=run_id, **values))
        return None
    except IntegrityError:
        pass
    with Session(engine) as s, s.begin():
        row = s.get(store.RunLease, run_id)
        if row is None:  # released between the two statements: try again
            return _try_take(engine, run_id, owner, host, ttl_s, clock)
        if not _stale(row, now, ttl_s, host):
            s.expunge(row)
            return row
        taken = s.execute(
            update(store.RunLease)
            .where(store.RunLease.run_id == run_id, store.RunLease.owner == row.owner)
            .values(**values)
        ).rowcount
    return None if taken else _try_take(engine, run_id, owner, host, ttl_s, clock)


def acquire(
    engine: Engine,
    run_id: int,
    *,
    run_name: str | None = None,
    ttl_s: float = DEFAULT_TTL_S,
    wait_s: float = 0.0,
    poll_s: float = 1.0,
    clock: Clock = store.utcnow,
    sleep: Callable[[float], None] = time.sleep,
) -> Lease:
    """Take the run's lease (heartbeat started), waiting up to ``wait_s`` for a live holder to finish.

    Raises :class:`LeaseHeld` when another live process still holds it after that.
    """
    owner, host = uuid.uuid4().hex, socket.gethostname()[:200]
    waited = 0.0
    while True:
        holder = _try_take(engine, run_id, owner, host, ttl_s, clock)
        if holder is None:
            return Lease(engine, run_id, owner, ttl_s, clock).start_heartbeat()
        if waited >= wait_s:
            if run_name is None:
                with Session(engine) as s:
                    run_name = s.scalar(select(store.Run.name).where(store.Run.id == run_id)) or str(run_id)
            raise LeaseHeld(_held_message(run_name, holder, clock(), ttl_s))
        sleep(poll_s)
        waited += poll_s
