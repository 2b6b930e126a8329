"""Repeat runs, the response cache and "cannot assess", through the CLI against real HTTP servers (the
simulated judge and a scripted one), on SQLite and PostgreSQL; the cache's crash guarantee with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import parse, prompts, runner, simjudge, store
from judgekit.harness import parse_harness
from judgekit.rubric import Criterion
from tests.conftest import all_pairs, load_demo, verdict_keys
from tests.scripted_server import ScriptedServer, malformed, slow

BACKENDS = ("sqlite", "postgresql")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sim(engine, db_url):
    load_demo(engine, 30)
    srv = simjudge.start_in_thread(db_url, simjudge.SimParams())
    yield srv
    srv.stop()


def run_cli(cli, base_url: str, *args: str) -> str:
    result = cli("run", "--dataset", "demo", "--rubric", "demo", "--base-url", base_url, "--model", simjudge.SIM_MODEL,
                 *args)
    assert result.exit_code == 0, result.stdout + result.stderr
    return result.stdout


def verdicts(engine, name: str) -> dict[tuple[int, int], int | None]:
    with Session(engine) as s:
        run = store.get_run(s, name)
        return dict(((e, c), v) for e, c, v in s.execute(
            select(store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value)
            .where(store.Verdict.run_id == run.id)))


def totals(engine, name: str) -> dict:
    with Session(engine) as s:
        return dict(store.get_run(s, name).totals)


# ------------------------------------------------------------------------------------------ repeats


def test_repeat_runs_know_they_are_repeats(cli, engine, sim):
    out = run_cli(cli, sim.base_url, "--harness", "split", "--limit", "20", "--repeat", "3", "--temperature", "1",
                  "--name", "noisy")
    assert out.count("): done") == 3
    with Session(engine) as s:
        runs = store.repeat_runs(s, store.get_run(s, "noisy-r2"))
        assert [(r.name, r.repeat_group, r.repeat_index) for r in runs] == [
            ("noisy-r1", "noisy", 1), ("noisy-r2", "noisy", 2), ("noisy-r3", "noisy", 3)]
        assert all(r.status == "done" for r in runs)
        assert all(r.harness == runs[0].harness for r in runs)
        assert all(store.run_example_ids(s, r.id) == store.run_example_ids(s, runs[0].id) for r in runs)
    first, second = verdicts(engine, "noisy-r1"), verdicts(engine, "noisy-r2")
    assert first.keys() == second.keys() and len(first) == 120
    flips = sum(first[k] != second[k] for k in first)
    # at T = 1 every draw is fresh: a = 0.9 flips about 2·0.9·0.1 ≈ 18 % (≈ 22 of 120); never none
    assert 8 <= flips <= 40, flips
    assert all(totals(engine, f"noisy-r{i}")["cache_hits"] == 0 for i in (1, 2, 3))
    # a second group gets the next free name; naming an existing group exactly is refused
    run_cli(cli, sim.base_url, "--harness", "single", "--limit", "5", "--repeat", "2", "--temperature", "1")
    again = cli("run", "--dataset", "demo", "--rubric", "demo", "--base-url", sim.base_url, "--model",
                simjudge.SIM_MODEL, "--limit", "5", "--repeat", "2", "--name", "noisy")
    assert again.exit_code == 2 and "repeat group 'noisy'" in again.stderr


def test_repeats_at_temperature_zero_never_read_the_cache(cli, engine, sim):
    run_cli(cli, sim.base_url, "--harness", "single", "--limit", "10", "--name", "first")
    before = sim.stats.completions
    run_cli(cli, sim.base_url, "--harness", "single", "--limit", "10", "--repeat", "2", "--name", "again")
    assert sim.stats.completions - before == 20  # both repeats asked the judge
    assert totals(engine, "again-r1")["cache_hits"] == totals(engine, "again-r2")["cache_hits"] == 0
    # the simulated judge is deterministic at temperature 0: its repeats agree exactly
    assert verdicts(engine, "again-r1") == verdicts(engine, "again-r2")


# ------------------------------------------------------------------------------------------ the cache


def test_identical_requests_are_answered_from_the_cache(cli, engine, sim):
    run_cli(cli, sim.base_url, "--harness", "split", "--limit", "10", "--name", "a")
    sent = sim.stats.completions
    assert sent == 60
    out = run_cli(cli, sim.base_url, "--harness", "split", "--limit", "10", "--name", "b")
    assert sim.stats.completions == sent  # nothing was sent
    a, b = totals(engine, "a"), totals(engine, "b")
    assert b["calls"] == b["cache_hits"] == 60 and b["retries"] == 0
    assert b["prompt_tokens"] == b["completion_tokens"] == 0  # nothing billed
    assert (b["saved_prompt_tokens"], b["saved_completion_tokens"]) == (a["prompt_tokens"], a["completion_tokens"])
    assert b["latency_p50"] is None
    assert "60 calls answered from the response cache" in out and "nothing billed" in out
    assert verdicts(engine, "a") == verdicts(engine, "b") and len(verdicts(engine, "a")) == 60
    with Session(engine) as s:
        run_b = store.get_run(s, "b")
        from judgekit import reports

        cost = reports.run_cost(s, run_b)
        assert cost.calls == 60 and cost.prompt_tokens == 0 and cost.retries == 0
        assert s.scalar(select(func.count()).select_from(store.Call)
                        .where(store.Call.run_id == run_b.id, store.Call.from_cache.is_(True))) == 60
    # an overlapping run: only the new examples are sent
    run_cli(cli, sim.base_url, "--harness", "split", "--limit", "12", "--name", "c")
    assert sim.stats.completions == sent + 12 and totals(engine, "c")["cache_hits"] == 60
    # --no-cache sends everything again; so does temperature > 0, which neither reads nor fills the cache
    run_cli(cli, sim.base_url, "--harness", "split", "--limit", "10", "--name", "d", "--no-cache")
    assert sim.stats.completions == sent + 12 + 60
    with Session(engine) as s:
        cached = s.scalar(select(func.count()).select_from(store.ResponseCache))
    run_cli(cli, sim.base_url, "--harness", "split", "--limit", "10", "--name", "e", "--temperature", "0.7")
    assert sim.stats.completions == sent + 12 + 120 and totals(engine, "e")["cache_hits"] == 0
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(store.ResponseCache)) == cached == 72
    # a different harness option changes the prompt, hence the key: nothing shared
    run_cli(cli, sim.base_url, "--harness", "split", "--limit", "10", "--name", "f", "--independence-note")
    assert totals(engine, "f")["cache_hits"] == 0


def test_unreadable_replies_are_never_cached(engine):
    load_demo(engine, 10)
    with ScriptedServer([malformed()]) as srv:  # the first reply is garbage, every later one reads fine
        spec = runner.JudgeSpec(base_url=srv.base_url, model="scripted", kind="openai")
        for name in ("one", "two"):
            with Session(engine) as s, s.begin():
                runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("split"), judge=spec,
                                  limit=1, name=name)
            runner.run_sync(engine, name, concurrency=1)
        sent = len(srv.requests)
    # run one: answers_question unscored (the garbage is not cached), five criteria read and cached;
    # run two: answers_question is asked again, the other five are answered from the cache
    assert totals(engine, "one")["unscored"] == 1
    assert totals(engine, "two")["cache_hits"] == 5 and totals(engine, "two")["unscored"] == 0
    assert sent == 6 + 1


def test_resume_after_sigkill_keeps_cache_and_calls_in_step(engine, db_url):
    """The cache entry of a call is written in the call's own transaction: after SIGKILL every cached reply
    has its stored call and every stored complete call its entry; resume and a re-run account exactly."""
    load_demo(engine, 20)
    concurrency = 4
    with ScriptedServer(default=slow(0.03)) as srv:
        spec = runner.JudgeSpec(base_url=srv.base_url, model="scripted", kind="openai")
        with Session(engine) as s, s.begin():
            runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("split"), judge=spec, limit=20,
                              name="killed")
        proc = subprocess.Popen(
            [sys.executable, "-m", "judgekit.cli", "resume", "killed", "--concurrency", str(concurrency)],
            cwd=ROOT, env={**os.environ, "JUDGEKIT_DB_URL": db_url},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with Session(engine) as s:
                if s.scalar(select(func.count()).select_from(store.Call)) >= 40:
                    break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with Session(engine) as s:
            stored = s.scalars(select(store.Call.request).where(store.Call.status == "ok")).all()
            keys = set(s.scalars(select(store.ResponseCache.key)))
        assert 40 <= len(stored) < 120, "the kill must land mid-run"
        assert keys == {r["cache"]["key"] for r in stored if r["cache"]["stored"]}
        assert all(r["cache"]["stored"] for r in stored)  # the scripted echo always reads completely
        summary = runner.run_sync(engine, "killed", concurrency=concurrency)
        served = len(srv.requests)
        with Session(engine) as s, s.begin():
            runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("split"), judge=spec, limit=20,
                              name="rerun")
        again = runner.run_sync(engine, "rerun", concurrency=concurrency)
        assert len(srv.requests) == served  # the re-run sent nothing
    assert summary.status == "done" and verdict_keys(engine, "killed") == all_pairs(engine, "killed")
    assert 0 <= served - 120 <= concurrency  # at most `concurrency` calls repeated by the kill
    assert again.status == "done" and again.cache_hits == 120 and again.calls_sent == 0
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(store.ResponseCache)) == 120


# ------------------------------------------------------------------------------------------ cannot assess


RUBRIC = """\
name: assess
criteria:
  - key: answers_question
    question: Does the answer address the user's actual question?
  - key: resolves_issue
    question: Did the user's issue get resolved after the conversation?
    cannot_assess: true
  - key: tone
    question: How friendly is the answer?
    kind: scale
    levels: {1: hostile, 2: curt, 3: neutral, 4: friendly, 5: warm}
    cannot_assess: true
"""


def test_cannot_assess_is_offered_only_where_enabled_and_counted(cli, engine, sim, workspace):
    path = workspace / "assess.yaml"
    path.write_text(RUBRIC)
    assert cli("import-rubric", path).exit_code == 0
    with Session(engine) as s:
        rubric = store.load_rubric(s, "assess")
    assert [c.cannot_assess for c in rubric.criteria] == [False, True, True]
    messages = prompts.build_messages(prompts.ExampleText("q", "c", "a"), rubric.criteria, parse_harness("single"))
    user = messages[1]["content"]
    assert user.count(prompts.CANNOT_ASSESS_LINE) == 2
    assert user.index(prompts.CANNOT_ASSESS_LINE) > user.index("- resolves_issue:")  # not under answers_question
    schema = prompts.response_schema(rubric.criteria, "verdict_first")["properties"]
    assert schema["answers_question"]["properties"]["verdict"] == {"type": "boolean"}
    assert {"type": "string", "enum": ["cannot_assess"]} in schema["resolves_issue"]["properties"]["verdict"]["anyOf"]

    out = cli("run", "--dataset", "demo", "--rubric", "assess", "--harness", "single", "--base-url", sim.base_url,
              "--model", simjudge.SIM_MODEL, "--name", "assess")
    assert out.exit_code == 0, out.stderr
    with Session(engine) as s:
        run = store.get_run(s, "assess")
        rows = s.execute(select(store.CriterionRow.key, store.Verdict.value, store.Verdict.cannot_assess,
                                store.Verdict.error)
                         .join(store.CriterionRow, store.CriterionRow.id == store.Verdict.criterion_id)
                         .where(store.Verdict.run_id == run.id)).all()
    by_key: dict[str, list] = {}
    for key, value, cannot, error in rows:
        by_key.setdefault(key, []).append((value, cannot, error))
    assert not any(c for _, c, _ in by_key["answers_question"])  # never offered, never given
    cannot = [r for k in ("resolves_issue", "tone") for r in by_key[k] if r[1]]
    assert cannot and all(v is None and e is None for v, _, e in cannot)  # its own outcome, not unscored
    t = totals(engine, "assess")
    assert t["cannot_assess"] == len(cannot) and t["unscored"] == 0
    assert f"{len(cannot)} cannot assess" in out.stdout


def test_cannot_assess_parses_only_where_offered():
    offered = Criterion("resolves_issue", "Resolved?", cannot_assess=True)
    plain = Criterion("answers_question", "Answers?")
    scale = Criterion("tone", "Tone?", "scale", {i: str(i) for i in range(1, 6)}, 3, cannot_assess=True)
    reply = ('{"resolves_issue": {"verdict": "Cannot assess", "rationale": "no outcome shown"}, '
             '"answers_question": {"verdict": "cannot_assess"}, "tone": "cannot-assess"}')
    got = parse.parse_reply(reply, [offered, plain, scale])
    assert got["resolves_issue"] == parse.ParsedVerdict(None, "no outcome shown", (), None, cannot_assess=True)
    assert got["tone"].cannot_assess and got["tone"].value is None
    # where the rubric does not offer it, the word is not a value for the criterion: unscored, not a fail
    assert got["answers_question"].value is None and not got["answers_question"].cannot_assess
    assert "not offered" in got["answers_question"].error


def test_a_bad_cannot_assess_flag_is_refused_with_its_line(cli, workspace, session):
    path = workspace / "bad.yaml"
    path.write_text(RUBRIC.replace("    cannot_assess: true\n  - key: tone", "    cannot_assess: sometimes\n  - key: tone"))
    result = cli("import-rubric", path)
    assert result.exit_code == 2
    assert "bad.yaml:5: field 'cannot_assess'" in result.stderr and "must be true or false" in result.stderr
    assert store.row_counts(session)["rubrics"] == 0
