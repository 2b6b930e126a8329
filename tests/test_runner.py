"""The runner against real HTTP servers through the real openai client: persistence, faults,
unscored replies, the circuit breaker, cancel, and kill-and-resume in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import runner, store
from judgekit.harness import parse_harness
from tests.conftest import all_pairs, verdict_keys
from tests.scripted_server import ScriptedServer, malformed, ok, reset, slow, status, truncated

ROOT = Path(__file__).resolve().parents[1]


def new_run(engine, base_url: str, spec: str = "split", *, limit: int = 10, name: str = "r", **opts) -> str:
    judge = runner.JudgeSpec(
        base_url=base_url,
        model="scripted",
        max_retries=opts.pop("max_retries", 4),
        timeout_s=opts.pop("timeout_s", 5.0),
    )
    with Session(engine) as s, s.begin():
        return runner.create_run(
            s,
            dataset="demo",
            rubric=opts.pop("rubric", "demo"),
            harness=parse_harness(spec, **opts),
            judge=judge,
            limit=limit,
            name=name,
        ).name



def fast_backoff(monkeypatch):
    """Small backoff so fault tests stay quick (the judge config's own knob, not a patch of the client)."""
    original = runner.judge_config

    def quick(judge):
        import dataclasses

        return dataclasses.replace(original(judge), backoff_base=0.01, backoff_cap=0.05)

    monkeypatch.setattr(runner, "judge_config", quick)


@pytest.mark.parametrize(
    ("spec", "calls_per_example"),
    [("single", 1), ("split", 6), ("grouped:answers_question+cites_source|grounded", 5)],
)
def test_every_call_and_verdict_is_stored(demo, spec, calls_per_example):
    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url, spec, limit=10)
        summary = runner.run_sync(demo, name, concurrency=4)
        assert len(srv.requests) == 10 * calls_per_example
    assert summary.status == "done" and summary.calls_sent == 10 * calls_per_example
    assert verdict_keys(demo, name) == all_pairs(demo, name)
    with Session(demo) as s:
        call = s.scalars(select(store.Call).limit(1)).one()
        assert call.request["messages"][0]["role"] == "system"
        assert "## Answer" in call.request["messages"][1]["content"]
        assert json.loads(call.response_text)  # the raw reply is kept
        assert call.status == "ok" and call.prompt_tokens > 0
        totals = store.get_run(s, name).totals
    assert totals["calls"] == 10 * calls_per_example and totals["failed_calls"] == 0
    assert totals["latency_p50"] is not None


def test_faults_are_retried_and_malformed_replies_are_unscored(demo, monkeypatch):
    fast_backoff(monkeypatch)
    script = [
        status(429, retry_after=0.05),
        status(500),
        reset(),
        ok(),
        malformed(),
        truncated(),
        status(503),
        ok(),
    ]
    with ScriptedServer(script) as srv:
        name = new_run(demo, srv.base_url, "split", limit=2, structured="json_object")
        summary = runner.run_sync(demo, name, concurrency=1)
    assert summary.status == "done"
    assert summary.unscored == 2  # the malformed and the truncated reply
    with Session(demo) as s:
        run = store.get_run(s, name)
        values = s.execute(
            select(store.Verdict.value, store.Verdict.error).where(store.Verdict.run_id == run.id)
        )
        values = list(values)
        assert len(values) == 12
        unscored = [e for v, e in values if v is None]
        assert len(unscored) == 2 and all(unscored)
        assert {v for v, _ in values if v is not None} == {1}  # echo says true; nothing became a fail
        assert run.totals["retries"] == 4 and run.totals["unscored"] == 2
        kept = s.scalars(
            select(store.Call.response_text).where(store.Call.response_text.like("Sure!%"))
        ).all()
        assert kept == ["Sure! The answer passes, I think. {verdict: maybe"]


def test_unparseable_reply_is_never_a_fail(demo):
    with ScriptedServer(default=malformed("I would say it fails.")) as srv:
        name = new_run(demo, srv.base_url, "single", limit=3, structured="prompt")
        summary = runner.run_sync(demo, name)
    assert summary.status == "done" and summary.unscored == 18
    with Session(demo) as s:
        assert s.scalar(select(func.count()).select_from(store.Verdict).where(store.Verdict.value == 0)) == 0


def test_circuit_breaker_stops_the_run_and_resume_finishes_it(demo, monkeypatch):
    fast_backoff(monkeypatch)
    healthy = threading.Event()

    def script(index, body):
        return ok() if healthy.is_set() else status(500, message="upstream exploded")

    with ScriptedServer(script) as srv:
        name = new_run(demo, srv.base_url, "split", limit=5, max_retries=1)
        summary = runner.run_sync(demo, name, concurrency=2, breaker=3)
        assert summary.status == "failed"
        assert "stopped after 3 consecutive failed calls" in summary.message
        assert "upstream exploded" in summary.message and f"judgekit resume {name}" in summary.message
        assert verdict_keys(demo, name) == []
        healthy.set()
        again = runner.run_sync(demo, name, concurrency=2, breaker=3)
    assert again.status == "done"
    assert verdict_keys(demo, name) == all_pairs(demo, name)


def test_cancel_then_resume_sends_only_missing_calls(demo):
    cancel = threading.Event()

    def progress(p):
        if p.done_calls >= 12:
            cancel.set()

    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url, "split", limit=10)
        first = runner.run_sync(demo, name, concurrency=2, progress=progress, cancel=cancel)
        assert first.status == "cancelled"
        stored_first = len(verdict_keys(demo, name))
        assert 12 <= stored_first < 60
        sent_before = len(srv.requests)
        second = runner.run_sync(demo, name, concurrency=2)
        assert second.status == "done"
        assert len(srv.requests) - sent_before == 60 - stored_first  # only the missing pairs
    assert verdict_keys(demo, name) == all_pairs(demo, name)


def test_api_key_is_sent_but_never_stored(demo, monkeypatch):
    monkeypatch.setenv("JK_TEST_KEY", "sk-live-RECOGNISABLE-4242")
    with ScriptedServer([status(401, message="bad key sk-live-RECOGNISABLE-4242")], default=ok()) as srv:
        judge = runner.JudgeSpec(base_url=srv.base_url, model="m", api_key_env="JK_TEST_KEY")
        with Session(demo) as s, s.begin():
            name = runner.create_run(
                s,
                dataset="demo",
                rubric="demo",
                harness=parse_harness("single"),
                judge=judge,
                limit=2,
                name="keyed",
            ).name
        runner.run_sync(demo, name)
        assert srv.requests[0].headers["authorization"] == "Bearer sk-live-RECOGNISABLE-4242"
    with Session(demo) as s:
        for table in (store.Judge, store.Run, store.Call, store.Verdict):
            for row in s.scalars(select(table)):
                text = json.dumps({c.name: str(getattr(row, c.key, "")) for c in table.__table__.columns})
                assert "RECOGNISABLE" not in text
    db_file = Path(os.environ["JUDGEKIT_DB_URL"].removeprefix("sqlite:///"))
    for f in db_file.parent.glob("judgekit.sqlite*"):
        assert b"RECOGNISABLE" not in f.read_bytes()


def test_kill_and_resume_in_a_subprocess(demo, db_url):
    """SIGKILL a CLI run mid-way; resume: the exact verdict set, no duplicates, ≤ concurrency repeats."""
    concurrency = 4
    with ScriptedServer(default=slow(0.03)) as srv:
        name = new_run(demo, srv.base_url, "split", limit=20)
        env = {**os.environ, "JUDGEKIT_DB_URL": db_url}
        proc = subprocess.Popen(
            [sys.executable, "-m", "judgekit.cli", "resume", name, "--concurrency", str(concurrency)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with Session(demo) as s:
                stored = s.scalar(select(func.count()).select_from(store.Call))
            if stored >= 40:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with Session(demo) as s:
            stored_calls = s.scalar(select(func.count()).select_from(store.Call))
        assert 40 <= stored_calls < 120, "the kill must land mid-run"
        summary = runner.run_sync(demo, name, concurrency=concurrency)
        served = len(srv.requests)
    assert summary.status == "done"
    assert verdict_keys(demo, name) == all_pairs(demo, name)  # exact set; the unique key forbids duplicates
    repeated = served - 120
    assert 0 <= repeated <= concurrency


def test_totals_accumulate_over_sessions(demo):
    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url, "split", limit=4)
        cancel = threading.Event()
        runner.run_sync(
            demo,
            name,
            concurrency=1,
            cancel=cancel,
            progress=lambda p: cancel.set() if p.done_calls >= 5 else None,
        )
        runner.run_sync(demo, name, concurrency=1)
    with Session(demo) as s:
        run = store.get_run(s, name)
        assert run.totals["calls"] == 24 and run.status == "done" and run.wall_s > 0


def test_cli_run_prints_a_summary(cli, demo):
    with ScriptedServer() as srv:
        result = cli(
            "run",
            "--dataset",
            "demo",
            "--rubric",
            "demo",
            "--harness",
            "grouped:grounded+no_fabrication",
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "--limit",
            "3",
            "--name",
            "cli-run",
            "--judge-kind",
            "openai",
        )
    assert result.exit_code == 0, result.stderr
    assert "run cli-run (#1): done" in result.stdout
    assert "15 calls" in result.stdout


def test_cli_run_rejects_bad_arguments(cli, demo):
    r = cli(
        "run",
        "--dataset",
        "demo",
        "--rubric",
        "demo",
        "--harness",
        "grouped:tone",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--judge-kind",
        "openai",
    )
    assert r.exit_code == 2 and "'tone', which is not a criterion" in r.stderr
    r = cli(
        "run",
        "--dataset",
        "demo",
        "--rubric",
        "demo",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--api-key-env",
        "JK_SURELY_UNSET_VAR",
    )
    assert r.exit_code == 2 and "JK_SURELY_UNSET_VAR: that environment variable is not set" in r.stderr
    with Session(demo) as s:
        assert store.row_counts(s)["runs"] == 0
