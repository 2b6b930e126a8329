"""Reliability: faults, an endpoint that goes away, and crashes lose nothing and mis-file nothing.

A fault-injecting OpenAI-compatible server (tests/scripted_server.py) answers a 2000-call run with
429 bursts (Retry-After), 500/503, connection resets, malformed and truncated JSON, and replies slower
than the timeout; a second run meets a 10-second outage; a third is SIGKILLed at three random points.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import imports, runner, store
from judgekit.harness import parse_harness
from tests.conftest import all_pairs, verdict_keys
from tests.scripted_server import ScriptedServer, malformed, ok, reset, slow, status, truncated

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture
def demo(engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=400)
    return engine


def split_run(engine, base_url: str, examples: int, name: str, **judge) -> str:
    spec = runner.JudgeSpec(base_url=base_url, model="faulty", **judge)
    with Session(engine) as s, s.begin():
        return runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("split"), judge=spec,
                                 limit=examples, name=name).name


def pairs(engine, name: str) -> tuple[list, list]:
    return verdict_keys(engine, name), all_pairs(engine, name)


class FaultScript:
    """Deterministic faults by request index; remembers which served replies were unusable."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.unusable = 0  # 200 replies that cannot be parsed (malformed or truncated JSON)

    def __call__(self, index: int, body: dict):
        if 300 <= index < 340:  # a burst of rate limiting
            return status(429, retry_after=0.2)
        with self.lock:
            r = self.rng.random()
        if r < 0.03:
            return status(500)
        if r < 0.05:
            return status(503, retry_after=0.05)
        if r < 0.07:
            return reset()
        if r < 0.08:
            return slow(1.5)  # beyond the 1 s timeout: retried
        if r < 0.10:
            with self.lock:
                self.unusable += 1
            return malformed() if r < 0.09 else truncated('{"answers_question": {"verdict": tr')
        return ok()


def test_2000_call_run_survives_faults(demo):
    script = FaultScript()
    with ScriptedServer(script) as srv:
        name = split_run(demo, srv.base_url, 334, "faults", timeout_s=1.0, max_retries=6)  # 334 × 6 = 2004 calls
        summary = runner.run_sync(demo, name, concurrency=32, breaker=50)
        served = len(srv.requests)
    assert summary.status == "done", summary.message
    t = summary.totals
    assert t["calls"] == 2004 and t["failed_calls"] == 0
    assert t["retries"] >= 40 + 0.05 * 2004  # the burst alone is 40 retried requests
    assert served == t["calls"] + t["retries"]  # every request the server saw is accounted for
    assert t["unscored"] == script.unusable > 0
    have, want = pairs(demo, name)
    assert have == want
    with Session(demo) as s:
        run = store.get_run(s, name)
        values = set(s.scalars(select(store.Verdict.value).where(store.Verdict.run_id == run.id)))
        raw = s.scalars(select(store.Call.response_text).where(store.Call.run_id == run.id,
                                                               store.Call.response_text.like("Sure!%"))).all()
    assert values == {1, None}  # the echo says pass; an unusable reply is unscored — never a fail
    assert raw and all(r.startswith("Sure! The answer passes") for r in raw)  # raw reply kept


def test_outage_trips_the_breaker_and_resume_finishes(demo):
    down_until = [0.0]

    def script(index, body):
        return reset() if time.monotonic() < down_until[0] else ok()

    with ScriptedServer(script) as srv:
        name = split_run(demo, srv.base_url, 100, "outage", timeout_s=2.0, max_retries=2)
        cancel_timer = threading.Timer(0.5, lambda: down_until.__setitem__(0, time.monotonic() + 10.0))
        cancel_timer.start()
        first = runner.run_sync(demo, name, concurrency=8, breaker=10)
        assert first.status == "failed"
        assert "stopped after 10 consecutive failed calls" in first.message
        assert "connection" in first.message.lower() and f"judgekit resume {name}" in first.message
        have, want = pairs(demo, name)
        assert 0 < len(have) < len(want)
        while time.monotonic() < down_until[0]:
            time.sleep(0.1)
        second = runner.run_sync(demo, name, concurrency=8, breaker=10)
    assert second.status == "done"
    have, want = pairs(demo, name)
    assert have == want


def test_three_sigkills_then_resume_lose_nothing(demo, db_url):
    concurrency = 16
    rng = random.Random(2026)
    kill_points = sorted(rng.sample(range(200, 1800), 3))
    with ScriptedServer(default=slow(0.01)) as srv:
        name = split_run(demo, srv.base_url, 334, "crashes")
        env = {**os.environ, "JUDGEKIT_DB_URL": db_url}
        lost_per_kill = []
        for point in kill_points:
            proc = subprocess.Popen(
                [sys.executable, "-m", "judgekit.cli", "resume", name, "--concurrency", str(concurrency)],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 120
            stored = 0
            while time.monotonic() < deadline and proc.poll() is None:
                with Session(demo) as s:
                    stored = s.scalar(select(func.count()).select_from(store.Call))
                if stored >= point:
                    break
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            with Session(demo) as s:
                stored = s.scalar(select(func.count()).select_from(store.Call))
            assert stored < 2004, "the kill must land mid-run"
            lost_per_kill.append(len(srv.requests) - stored - sum(lost_per_kill))
        final = runner.run_sync(demo, name, concurrency=concurrency)
        served = len(srv.requests)
    assert final.status == "done"
    have, want = pairs(demo, name)
    assert have == want  # exact set; the unique key makes a duplicate impossible, and none is missing
    assert all(0 <= lost <= concurrency for lost in lost_per_kill), lost_per_kill
    assert served - 2004 == sum(lost_per_kill)
