"""Runs that must not get stuck or waste calls: one process at a time per run (a lease, on SQLite and
PostgreSQL), Ctrl-C leaves a resumable ``interrupted`` run with every reply that came back stored, and a
run sent through the Batch API continues as a batch from every entry point — the dashboard's Resume too.

Real parts: `judgekit` processes, the scripted OpenAI-compatible server (live and Batch API routes), the
real database; the Run page through Streamlit's AppTest."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from judgekit import batch, imports, runner, store
from judgekit.harness import parse_harness
from tests.conftest import all_pairs, verdict_keys, wait_until
from tests.scripted_server import ScriptedServer, slow

BACKENDS = ("sqlite", "postgresql")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=30)
    return engine


def new_run(engine, base_url: str, *, limit: int = 20, name: str = "r", spec: str = "split") -> str:
    judge = runner.JudgeSpec(base_url=base_url, model="gpt-test", timeout_s=10.0)
    with Session(engine) as s, s.begin():
        return runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness(spec), judge=judge,
                                 limit=limit, name=name).name


def stored_calls(engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(store.Call))


def resume_process(db_url: str, name: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "judgekit.cli", "resume", name, *extra], cwd=ROOT,
        env={**os.environ, "JUDGEKIT_DB_URL": db_url}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(predicate, what: str) -> None:
    wait_until(predicate, message=what, poll=0.05)


def run_id(engine, name: str) -> int:
    with Session(engine) as s:
        return store.get_run(s, name).id


# ------------------------------------------------------------------------------------------ leases


def test_two_resume_processes_never_both_send_calls(demo, db_url):
    gate = threading.Event()  # replies are slow until the second process has been turned away

    def script(index: int, body: dict):
        return slow(0.01 if gate.is_set() else 3.0)

    with ScriptedServer(script) as srv:
        name = new_run(demo, srv.base_url)  # 20 examples × 6 criteria = 120 calls
        first = resume_process(db_url, name, "--concurrency", "4")
        try:
            wait_for(lambda: stored_calls(demo) >= 4, what="the first process to store calls")
            second = resume_process(db_url, name, "--concurrency", "4")
            out, err = second.communicate(timeout=120)
            assert first.poll() is None, "the first process must still be running when the second is refused"
        finally:
            gate.set()
            first.wait(180)
        served = len(srv.requests)
    assert second.returncode == 2
    assert "being executed by another process" in err and f"pid {first.pid}" in err
    assert first.returncode == 0
    assert served == stored_calls(demo) == 120  # every call sent once
    assert verdict_keys(demo, name) == all_pairs(demo, name)


def test_lease_refuses_a_live_holder_and_takes_over_a_dead_one(demo):
    from judgekit import lease

    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url, limit=2)
    rid = run_id(demo, name)
    held = lease.acquire(demo, rid)
    with pytest.raises(lease.LeaseHeld, match="being executed by another process"):
        lease.acquire(demo, rid)
    with pytest.raises(lease.LeaseHeld):  # no endpoint is needed to be refused: nothing is sent
        runner.run_sync(demo, name)
    held.release()
    lease.acquire(demo, rid).release()  # free again

    dead = subprocess.Popen(["true"])
    dead.wait()
    now = store.utcnow()
    with Session(demo) as s, s.begin():  # a holder on this machine whose process is gone (SIGKILL)
        s.execute(insert(store.RunLease).values(run_id=rid, owner="gone", host=socket.gethostname()[:200],
                                                pid=dead.pid, acquired_at=now, heartbeat_at=now))
    lease.acquire(demo, rid).release()  # taken over at once


def test_lease_from_another_machine_expires_by_its_heartbeat(demo):
    from judgekit import lease

    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url, limit=2)
    rid = run_id(demo, name)
    t0 = dt.datetime(2026, 12, 1, 12, 0, 0)
    with Session(demo) as s, s.begin():
        s.execute(insert(store.RunLease).values(run_id=rid, owner="remote", host="another-machine", pid=1,
                                                acquired_at=t0, heartbeat_at=t0))
    with pytest.raises(lease.LeaseHeld, match="another-machine"):
        lease.acquire(demo, rid, ttl_s=60, clock=lambda: t0 + dt.timedelta(seconds=59))
    slept: list[float] = []
    with pytest.raises(lease.LeaseHeld):  # waiting is bounded by wait_s, in the injected sleep's time
        lease.acquire(demo, rid, ttl_s=60, wait_s=3, poll_s=1, clock=lambda: t0, sleep=slept.append)
    assert slept == [1, 1, 1]
    taken = lease.acquire(demo, rid, ttl_s=60, clock=lambda: t0 + dt.timedelta(seconds=61))
    with Session(demo) as s, s.begin():  # the remote process comes back and takes it again
        s.get(store.RunLease, rid).owner = "remote-again"
    assert taken.heartbeat() is False and taken.lost.is_set()
    taken.release()
    with Session(demo) as s:
        assert s.get(store.RunLease, rid).owner == "remote-again"  # releasing a lost lease leaves it alone


# -------------------------------------------------------------------------------------------- Ctrl-C


@pytest.mark.sqlite_only
def test_ctrl_c_finishes_the_writes_in_flight_and_leaves_an_interrupted_resumable_run(demo, db_url):
    concurrency = 4
    with ScriptedServer(default=slow(0.2)) as srv:
        name = new_run(demo, srv.base_url)
        proc = resume_process(db_url, name, "--concurrency", str(concurrency))
        wait_for(lambda: stored_calls(demo) >= 8, what="calls to be stored")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        served, stored = len(srv.requests), stored_calls(demo)
        with Session(demo) as s:
            run = store.get_run(s, name)
            status, message = run.status, run.message
        assert proc.returncode == 130, err
        assert status == "interrupted" and f"judgekit resume {name}" in message
        assert "Traceback" not in err
        assert 8 <= stored < 120
        assert 0 <= served - stored <= concurrency  # replies that came back within the grace period are stored
        final = runner.run_sync(demo, name, concurrency=concurrency)
    assert final.status == "done"
    assert verdict_keys(demo, name) == all_pairs(demo, name)
    with Session(demo) as s:
        assert s.scalar(select(func.count()).select_from(store.RunLease)) == 0  # released on the way out


# --------------------------------------------------------------------------------- batch or live


def test_a_second_process_cannot_continue_a_batch_run_either(demo):
    from judgekit import continuation, lease

    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url, limit=3)
        held = lease.acquire(demo, run_id(demo, name))
        try:
            with pytest.raises(lease.LeaseHeld):
                continuation.continue_run_sync(demo, name, use_batch=True, poll_interval=0.01)
        finally:
            held.release()
        assert srv.count("POST", "/files") == 0 and not srv.requests


@pytest.mark.sqlite_only
def test_resume_on_the_run_page_continues_a_batch_as_a_batch(demo, db_url, monkeypatch):
    """A run sent through the Batch API and resumed from the dashboard (Run page → Resume) polls and imports
    its batch: not one live call for work the batch holds."""
    import asyncio

    from streamlit.testing.v1 import AppTest

    from judgekit import config, jobs

    monkeypatch.chdir(config.REPO_DIR)
    with ScriptedServer() as srv:
        srv.batch.polls_to_complete = 1  # finished at the page's first poll
        name = new_run(demo, srv.base_url, limit=5)
        state = asyncio.run(batch.submit(demo, name))
        assert state.status in batch.IN_FLIGHT
        at = AppTest.from_file(str(config.REPO_DIR / "app.py"), default_timeout=60)
        at.run()
        at.switch_page("pages/run.py")
        at.run()
        assert not at.exception, at.exception
        at.button(key=f"run_resume_{name}").click().run()
        assert not at.exception, at.exception
        wait_for(lambda: not jobs.active(db_url), what="the resumed job")
        job = jobs.get(db_url, name)
        assert job is not None and job.error is None, job and job.error
        assert srv.requests == []  # no live /chat/completions call at all
        assert srv.count("POST", "/batches") == 1  # the batch submitted before, not a second one
    with Session(demo) as s:
        assert store.get_run(s, name).status == "done"
    assert verdict_keys(demo, name) == all_pairs(demo, name)
