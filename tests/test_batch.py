"""OpenAI Batch API runs against the scripted server's /v1/files and /v1/batches routes, through the
real openai client, into a real SQLite file: the exact verdict set, resume after a crash at each step
(no second batch, nothing imported twice), unscored and error lines, failed/expired batches, the key."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import batch, client, imports, runner, store
from judgekit.harness import parse_harness
from judgekit.openai_server import Usage, echo_reply, make_logprobs
from tests.conftest import all_pairs, verdict_keys
from tests.scripted_server import ScriptedServer, malformed, ok, status

ROOT = Path(__file__).resolve().parents[1]
FAST = 0.01  # poll interval in tests


class Crash(Exception):
    """Stands in for the process dying at a chosen point."""


def new_run(engine, base_url: str, spec: str = "split", *, limit: int = 20, name: str = "b", **opts) -> str:
    judge = runner.JudgeSpec(
        base_url=base_url, model="gpt-test", api_key_env=opts.pop("api_key_env", None), timeout_s=5.0
    )
    with Session(engine) as s, s.begin():
        return runner.create_run(
            s, dataset="demo", rubric="demo", harness=parse_harness(spec, **opts), judge=judge, limit=limit,
            name=name,
        ).name


def count_calls(engine, **where) -> int:
    with Session(engine) as s:
        q = select(func.count()).select_from(store.Call)
        for k, v in where.items():
            q = q.where(getattr(store.Call, k) == v)
        return s.scalar(q)


def run_row(engine, name: str) -> store.Run:
    with Session(engine) as s:
        run = store.get_run(s, name)
        s.expunge(run)
        return run


def test_batch_run_lands_the_exact_verdict_set(demo):
    usage = Usage(prompt_tokens=300, completion_tokens=25, cached_tokens=128)
    with ScriptedServer(default=ok(usage=usage)) as srv:
        name = new_run(demo, srv.base_url, "split", limit=20)
        data, n = batch.build_batch_file(demo, name)
        lines = [json.loads(line) for line in data.decode().splitlines()]
        assert n == len(lines) == 120  # 20 examples × 6 criteria, one request per line
        ids = [line["custom_id"] for line in lines]
        assert len(set(ids)) == 120
        run_id = run_row(demo, name).id
        assert all(i.startswith(f"{run_id}:") and i.count(":") == 2 and "+" not in i for i in ids)
        first = lines[0]
        assert first["method"] == "POST" and first["url"] == "/v1/chat/completions"
        assert first["body"]["model"] == "gpt-test"
        assert first["body"]["response_format"]["type"] == "json_schema"
        assert set(first["body"]) >= {"messages", "temperature", "max_tokens"}

        states = []
        summary = batch.run_batch_sync(demo, name, interval_s=FAST, progress=states.append)
        assert srv.count("POST", "/batches") == 1 and srv.count("POST", "/files") == 1
        assert srv.stats.batch_lines == 120 and srv.stats.completions == 0  # nothing went out live
        upload = next(r for r in srv.api_requests if r.path.endswith("/files"))
        assert upload.body == {"purpose": "batch", "filename": f"judgekit-run-{run_id}.jsonl"}
    assert [s.status for s in states][-1] == "completed"
    assert summary.status == "done" and summary.message == ""
    assert summary.calls_sent == 120 and summary.failed_calls == 0 and summary.unscored == 0
    assert verdict_keys(demo, name) == all_pairs(demo, name)
    run = run_row(demo, name)
    assert run.status == "done" and run.batch["imported"] and run.batch["request_count"] == 120
    t = run.totals
    assert (t["calls"], t["prompt_tokens"], t["completion_tokens"], t["cached_tokens"]) == (
        120, 120 * 300, 120 * 25, 120 * 128,
    )
    with Session(demo) as s:
        call = s.scalars(select(store.Call).limit(1)).one()
        assert call.status == "ok" and call.structured_mode == "json_schema"
        assert call.request["batch_id"] == run.batch["batch_id"] and call.request["custom_id"] in ids
        assert "## Answer" in call.request["messages"][1]["content"]
        assert json.loads(call.response_text)
        assert s.scalar(select(func.count()).select_from(store.Verdict).where(store.Verdict.value == 1)) == 120


def test_batch_requests_match_the_live_runner(demo):
    """Same planner and prompt builders: a batch line's body is what a live call would have sent."""
    with ScriptedServer() as srv:
        live = new_run(demo, srv.base_url, "grouped:answers_question+cites_source|grounded", limit=3,
                       name="live", shuffle=True, structured="json_schema")
        runner.run_sync(demo, live)
        sent = {json.dumps(r.body, sort_keys=True) for r in srv.requests}
        queued = new_run(demo, srv.base_url, "grouped:answers_question+cites_source|grounded", limit=3,
                         name="queued", shuffle=True, structured="json_schema")
        data, n = batch.build_batch_file(demo, queued)
    bodies = {json.dumps(json.loads(line)["body"], sort_keys=True) for line in data.decode().splitlines()}
    assert n == 3 * 5 and bodies == sent


def test_logprobs_come_back_through_the_batch(demo):
    def with_logprobs(body):
        reply = echo_reply(body)
        text = reply.content
        reply.logprobs = make_logprobs(text, {text.index("true"): [("true", math.log(0.8)), ("false", math.log(0.2))]})
        return reply

    with ScriptedServer(default=with_logprobs) as srv:
        name = new_run(demo, srv.base_url, "split", limit=3, logprobs=True)
        summary = batch.run_batch_sync(demo, name, interval_s=FAST)
    assert summary.status == "done"
    with Session(demo) as s:
        probs = s.scalars(select(store.Verdict.p_pass)).all()
    assert len(probs) == 18 and probs == pytest.approx([0.8] * 18)


def test_interrupted_while_waiting_resumes_the_same_batch(demo):
    with ScriptedServer() as srv:
        srv.batch.polls_to_complete = 4
        name = new_run(demo, srv.base_url)
        state = asyncio.run(batch.submit(demo, name))
        assert state.status == "validating" and state.request_count == 120
        assert run_row(demo, name).batch["batch_id"] == state.batch_id  # stored before submit returned
        assert asyncio.run(batch.submit(demo, name)) == state  # live: not resubmitted

        def die(s):
            if s.status == "in_progress":
                raise Crash

        with pytest.raises(Crash):
            asyncio.run(batch.poll(demo, name, interval_s=FAST, progress=die))
        assert run_row(demo, name).status == "batching"
        assert count_calls(demo) == 0

        summary = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert summary.status == "done" and summary.calls_sent == 120
        assert srv.count("POST", "/batches") == 1 and srv.count("POST", "/files") == 1
        assert verdict_keys(demo, name) == all_pairs(demo, name)

        again = asyncio.run(batch.import_results(demo, name))  # the same output, imported twice
        assert again.calls_sent == 0 and again.status == "done"
        rerun = batch.run_batch_sync(demo, name, interval_s=FAST)  # nothing pending: nothing sent
        assert rerun.calls_sent == 0 and rerun.status == "done"
        assert srv.count("POST", "/batches") == 1
    assert count_calls(demo) == 120


def test_crash_after_the_server_created_the_batch_adopts_it(demo):
    """The create request reached the server but its answer was lost: the batch is found, not repeated."""
    with ScriptedServer() as srv:
        name = new_run(demo, srv.base_url)
        with Session(demo) as s:
            judge = runner.judge_config(s.get(store.Judge, store.get_run(s, name).judge_id))

        async def submit_and_die():
            c = client.make_client(judge)
            real = c.batches.create

            async def create(**kwargs):
                await real(**kwargs)
                raise Crash

            c.batches.create = create
            try:
                await batch.submit(demo, name, client=c)
            finally:
                await c.close()

        with pytest.raises(Crash):
            asyncio.run(submit_and_die())
        assert run_row(demo, name).batch["status"] == "uploaded"
        summary = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert srv.count("POST", "/batches") == 1 and srv.count("POST", "/files") == 1
    assert summary.status == "done" and verdict_keys(demo, name) == all_pairs(demo, name)


def test_crash_during_the_import_adds_nothing_twice(demo, monkeypatch):
    def script(index, body):
        return status(500, message="overloaded") if index % 9 == 4 else ok()

    with ScriptedServer(script) as srv:
        name = new_run(demo, srv.base_url)
        asyncio.run(batch.submit(demo, name))
        asyncio.run(batch.poll(demo, name, interval_s=FAST))
        monkeypatch.setattr(batch, "IMPORT_CHUNK", 40)
        real_insert, inserted = store.insert_call, []

        def insert_then_die(s, call, verdicts):
            inserted.append(call)
            if len(inserted) == 90:
                raise Crash
            return real_insert(s, call, verdicts)

        monkeypatch.setattr(store, "insert_call", insert_then_die)
        with pytest.raises(Crash):
            asyncio.run(batch.import_results(demo, name))
        assert count_calls(demo) == 80  # two chunks committed, the third rolled back
        monkeypatch.setattr(store, "insert_call", real_insert)
        first = asyncio.run(batch.import_results(demo, name))
        second = asyncio.run(batch.import_results(demo, name))
    errors = sum(1 for i in range(120) if i % 9 == 4)
    assert first.calls_sent == 40 and second.calls_sent == 0
    assert count_calls(demo) == 120 and count_calls(demo, status="error") == errors
    assert len(verdict_keys(demo, name)) == 120 - errors
    assert first.status == "incomplete"


def test_malformed_lines_are_unscored_and_error_lines_are_rebatched(demo):
    healthy = False

    def script(index, body):
        if healthy:
            return ok()
        if index % 10 == 3:
            return malformed()
        if index % 10 == 7:
            return status(503, message="upstream exploded")
        return ok()

    with ScriptedServer(script) as srv:
        name = new_run(demo, srv.base_url)
        run_id = run_row(demo, name).id
        broken = f"{run_id}:{first_example_id(demo, name)}:grounded"  # lost by the batch itself
        srv.batch.line_error = lambda cid: {"code": "server_error", "message": "lost"} if cid == broken else None
        first = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert first.status == "incomplete"
        assert first.unscored == 12 and first.failed_calls == 12 + 1
        assert "13 calls are still missing" in first.message and f"judgekit resume {name}" in first.message
        with Session(demo) as s:
            values = s.execute(
                select(store.Verdict.value).where(store.Verdict.run_id == run_id)
            ).scalars().all()
            assert len(values) == 120 - 13 and values.count(None) == 12 and 0 not in values
            errors = s.scalars(select(store.Call.error).where(store.Call.status == "error")).all()
            assert sum("HTTP 503: upstream exploded" in e for e in errors) == 12
            assert sum("batch error server_error: lost" in e for e in errors) == 1
            assert s.scalar(
                select(store.Call.response_text).where(store.Call.response_text.like("Sure!%"))
            ) == "Sure! The answer passes, I think. {verdict: maybe"
        missing = set(all_pairs(demo, name)) - set(verdict_keys(demo, name))

        healthy, srv.batch.line_error = True, None
        sent_before = srv.stats.batch_lines
        second = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert srv.stats.batch_lines - sent_before == 13  # just the failed pairs
        assert srv.count("POST", "/batches") == 2
    assert second.status == "done" and second.calls_sent == 13
    assert verdict_keys(demo, name) == all_pairs(demo, name) and len(missing) == 13
    state = batch.load_state(demo, name)
    assert state.request_count == 13 and len(state.history) == 1 and state.history[0]["failed"] == 13


def first_example_id(engine, run_name: str) -> int:
    """The internal id of the run's first example."""
    with Session(engine) as s:
        return store.run_example_ids(s, store.get_run(s, run_name).id)[0]


def test_failed_batch_is_reported_and_can_be_batched_again(demo):
    with ScriptedServer() as srv:
        srv.batch.outcome = "failed"
        srv.batch.failure_message = "Enqueued token limit reached for gpt-test."
        name = new_run(demo, srv.base_url)
        summary = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert summary.status == "failed" and summary.calls_sent == 0
        assert "failed: batch_failed: Enqueued token limit reached for gpt-test." in summary.message
        assert f"`judgekit resume {name}` submits a new batch" in summary.message
        run = run_row(demo, name)
        assert run.status == "failed" and run.message == summary.message and run.batch["status"] == "failed"
        assert count_calls(demo) == 0

        srv.batch.outcome = "completed"
        again = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert srv.count("POST", "/batches") == 2
    assert again.status == "done" and verdict_keys(demo, name) == all_pairs(demo, name)


def test_expired_batch_keeps_what_finished_and_batches_the_rest(demo):
    with ScriptedServer() as srv:
        srv.batch.outcome, srv.batch.expire_after = "expired", 50
        name = new_run(demo, srv.base_url)
        summary = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert summary.status == "expired" and summary.calls_sent == 50
        assert "expired before it finished: 50 of 120 requests came back" in summary.message
        assert "70 calls are still missing" in summary.message
        assert len(verdict_keys(demo, name)) == 50

        srv.batch.outcome = "completed"
        again = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert batch.load_state(demo, name).request_count == 70
    assert again.status == "done" and again.calls_sent == 70
    assert verdict_keys(demo, name) == all_pairs(demo, name)


def test_api_key_is_sent_but_never_stored_or_shown(demo, monkeypatch):
    key = "sk-live-RECOGNISABLE-4242"
    monkeypatch.setenv("JK_BATCH_KEY", key)

    def script(index, body):
        return status(401, message=f"bad key {key}") if index < 3 else ok()

    with ScriptedServer(script) as srv:
        srv.batch.outcome = "failed"
        srv.batch.failure_message = f"key {key} has no batch quota"
        name = new_run(demo, srv.base_url, api_key_env="JK_BATCH_KEY")
        failed = batch.run_batch_sync(demo, name, interval_s=FAST)
        srv.batch.outcome = "completed"
        done = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert srv.api_requests and all(r.headers["authorization"] == f"Bearer {key}" for r in srv.api_requests)
        assert failed.status == "failed" and "has no batch quota" in failed.message
        assert done.status == "incomplete" and done.failed_calls == 3
        for text in (failed.message, done.message):
            assert "RECOGNISABLE" not in text
        with Session(demo) as s:
            errors = s.scalars(select(store.Call.error).where(store.Call.status == "error")).all()
            assert len(errors) == 3 and all("HTTP 401: bad key ***" in e for e in errors)
        db_file = Path(os.environ["JUDGEKIT_DB_URL"].removeprefix("sqlite:///"))
        for f in db_file.parent.glob("judgekit.sqlite*"):
            assert b"RECOGNISABLE" not in f.read_bytes()

        # A server that echoes the key in an error (here: a 404 for a file id planted to contain it).
        with Session(demo) as s, s.begin():
            run = store.get_run(s, name)
            run.batch = {**run.batch, "imported": False, "output_file_id": key}
        with pytest.raises(batch.BatchError) as err:
            asyncio.run(batch.import_results(demo, name))
    assert "RECOGNISABLE" not in str(err.value) and "HTTP 404" in str(err.value)


def test_killed_process_resumes_without_a_second_batch(demo, db_url):
    """SIGKILL a process that is waiting on its batch; run_batch again picks the same batch up."""
    with ScriptedServer() as srv:
        srv.batch.polls_to_complete = 10**6
        name = new_run(demo, srv.base_url)
        code = (
            "import sys; from judgekit import batch, store; "
            "batch.run_batch_sync(store.engine_for(sys.argv[1]), sys.argv[2], interval_s=0.02)"
        )
        proc = subprocess.Popen([sys.executable, "-c", code, db_url, name], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                state = batch.load_state(demo, name)
                if state is not None and state.status == "in_progress":
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the batch never got going")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        assert run_row(demo, name).status == "batching"
        srv.batch.polls_to_complete = 0
        summary = batch.run_batch_sync(demo, name, interval_s=FAST)
        assert srv.count("POST", "/batches") == 1
    assert summary.status == "done" and verdict_keys(demo, name) == all_pairs(demo, name)


def test_cli_run_batch_and_resume(cli, engine):
    """`judgekit run --batch` submits, polls and imports; `resume` on the finished run sends nothing."""
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    with ScriptedServer() as srv:
        result = cli("run", "--dataset", "demo", "--rubric", "demo", "--harness", "split", "--base-url",
                     srv.base_url, "--model", "gpt-4o-mini", "--limit", "4", "--name", "b", "--batch",
                     "--poll-interval", "0.01", "--judge-kind", "openai")
        assert result.exit_code == 0, result.stderr
        assert "run b (#1): done" in result.stdout
        assert srv.count("POST", "/batches") == 1
        again = cli("resume", "b", "--poll-interval", "0.01")
        assert again.exit_code == 0, again.stderr
        assert srv.count("POST", "/batches") == 1
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(store.Verdict)) == 24
