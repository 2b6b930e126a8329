"""What a judge's reply may never do to the store, on SQLite and PostgreSQL alike: a score outside its scale
or a value given ambiguously stored as a verdict; an HTTP 200 error envelope taken for an ok call; a 10 MB
reply stored whole; a per-example refusal tripping the breaker or the structured-output ladder; a NUL
byte, a lone surrogate or a string token count failing the run on one store and not the other.

Real parts: the scripted OpenAI-compatible server over HTTP, the real ``openai`` client, the runner, and a
real SQLite file or PostgreSQL database (``BACKENDS``)."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import batch, client, reports, runner, store
from judgekit.harness import parse_harness
from judgekit.openai_server import Reply
from judgekit.rubric import Criterion, Rubric
from tests.scripted_server import ScriptedServer, ok, status

BACKENDS = ("sqlite", "postgresql")
LEVELS = {i: f"level {i}" for i in range(1, 6)}
RAW_EDGE = 32 * 1024  # judgekit.rawtext.RAW_EDGE (a literal: these tests also run on the code before it)
CONTEXT_ERROR = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9412 tokens."


@pytest.fixture
def small(engine):
    """Dataset ``d`` (e0…e5, each answer names its id), rubric ``bin`` (safe, helpful), rubric ``sc`` (quality
    1–5)."""
    with Session(engine) as s, s.begin():
        store.insert_dataset(
            s, "d", [{"id": f"e{i}", "question": "How?", "answer": f"ANSWER-e{i} is the answer."} for i in range(6)]
        )
        store.save_rubric(s, Rubric("bin", (Criterion("safe", "Safe?"), Criterion("helpful", "Helpful?"))))
        store.save_rubric(s, Rubric("sc", (Criterion("quality", "Quality?", "scale", LEVELS, 3),)))
    client.forget_structured_modes()
    return engine


def example_of(body: dict) -> str:
    """Which example a request is about (the answer names it)."""
    text = json.dumps(body.get("messages"))
    return next(f"e{i}" for i in range(6) if f"ANSWER-e{i}" in text)


def make_run(engine, base_url: str, rubric: str, spec: str = "single", name: str = "r", **opts) -> str:
    judge = runner.JudgeSpec(base_url=base_url, model="judge-under-test", timeout_s=5.0,
                             max_retries=opts.pop("max_retries", 3))
    with Session(engine) as s, s.begin():
        return runner.create_run(s, dataset="d", rubric=rubric, harness=parse_harness(spec, **opts), judge=judge,
                                 name=name).name


def stored(engine, name: str) -> dict[tuple[str, str], store.Verdict]:
    """(example id, criterion key) → the verdict row."""
    with Session(engine) as s:
        run = store.get_run(s, name)
        rows = s.execute(
            select(store.Example.ext_id, store.CriterionRow.key, store.Verdict)
            .join(store.Example, store.Example.id == store.Verdict.example_id)
            .join(store.CriterionRow, store.CriterionRow.id == store.Verdict.criterion_id)
            .where(store.Verdict.run_id == run.id)
        ).all()
        for *_, v in rows:
            s.expunge(v)
    return {(e, k): v for e, k, v in rows}


def calls(engine, name: str) -> list[store.Call]:
    with Session(engine) as s:
        run = store.get_run(s, name)
        out = s.scalars(select(store.Call).where(store.Call.run_id == run.id).order_by(store.Call.id)).all()
        for c in out:
            s.expunge(c)
    return list(out)


# ---------------------------------------------------------------------------------- wrong values


def test_scale_scores_outside_the_scale_are_unscored_with_the_raw_reply_kept(small):
    scores = {"e0": 0, "e1": 6, "e2": 10, "e3": -1, "e4": 4, "e5": 3.5}
    with ScriptedServer(lambda i, body: ok({"quality": {"verdict": scores[example_of(body)], "rationale": "r"}})) as srv:
        name = make_run(small, srv.base_url, "sc")
        summary = runner.run_sync(small, name, concurrency=2)
    assert summary.status == "done"
    got = stored(small, name)
    assert {e: got[(e, "quality")].value for e in scores} == {
        "e0": None, "e1": None, "e2": None, "e3": None, "e4": 4, "e5": None
    }
    assert "outside the 1–5 scale" in got[("e1", "quality")].error
    raw = {c.response_text for c in calls(small, name)}
    assert any('"verdict": 6' in r for r in raw) and any('"verdict": -1' in r for r in raw)  # raw reply kept


def test_keys_differing_by_case_or_spacing_never_store_a_value_the_reply_did_not_clearly_give(small):
    replies = {
        "e0": '{"Safe": true, "safe": false, "helpful": true}',  # two answers for one criterion
        "e1": '{"SAFE ": true, "Helpful": false}',  # one loose match each: clear
        "e2": '{"safe": true, "safe": false, "helpful": true}',  # one key twice
        "e3": '{"safe": {"verdict": true, "Verdict": false}, "helpful": {"verdict": true}}',
        "e4": '{"Safe": true, "safe": true, "helpful": true}',  # variants that agree: clear
        "e5": '{"safe": true, "helpful": true}',
    }
    with ScriptedServer(lambda i, body: ok(replies[example_of(body)])) as srv:
        name = make_run(small, srv.base_url, "bin")
        assert runner.run_sync(small, name, concurrency=2).status == "done"
    got = stored(small, name)
    assert {e: got[(e, "safe")].value for e in replies} == {"e0": None, "e1": 1, "e2": None, "e3": None, "e4": 1,
                                                            "e5": 1}
    assert {e: got[(e, "helpful")].value for e in replies} == {"e0": 1, "e1": 0, "e2": 1, "e3": 1, "e4": 1, "e5": 1}
    assert "ambiguous" in got[("e0", "safe")].error


# ------------------------------------------------------------------------------ error envelopes


ENVELOPE = json.dumps({"error": {"message": "upstream overloaded", "type": "server_error", "code": 503}}).encode()


def test_http_200_error_envelope_is_retried_and_counted(small):
    script = [Reply(raw_body=ENVELOPE), Reply(raw_body=b'{"id": "x", "object": "chat.completion"}')]
    with ScriptedServer(script) as srv:  # then echo replies
        name = make_run(small, srv.base_url, "bin", max_retries=3)
        summary = runner.run_sync(small, name, concurrency=1)
        served = len(srv.requests)
    assert summary.status == "done"
    assert summary.totals["retries"] == 2 and summary.totals["failed_calls"] == 0
    assert served == 6 + 2
    assert all(v.value == 1 for v in stored(small, name).values())


def test_http_200_error_envelope_that_persists_is_a_failed_call_that_resume_retries(small):
    def script(i, body):
        return Reply(raw_body=ENVELOPE) if example_of(body) == "e2" else ok()

    with ScriptedServer(script) as srv:
        name = make_run(small, srv.base_url, "bin", max_retries=1)
        first = runner.run_sync(small, name, concurrency=1)
    assert first.status == "incomplete" and first.totals["failed_calls"] == 1
    failed = [c for c in calls(small, name) if c.status != "ok"]
    assert len(failed) == 1 and failed[0].status == "error" and "HTTP 200 with an error body" in failed[0].error
    assert not [k for k in stored(small, name) if k[0] == "e2"]  # no verdicts: still pending
    with ScriptedServer() as srv:
        with Session(small) as s, s.begin():
            s.get(store.Judge, store.get_run(s, name).judge_id).base_url = srv.base_url
        second = runner.run_sync(small, name)
    assert second.status == "done" and second.calls_sent == 1
    assert stored(small, name)[("e2", "safe")].value == 1


def test_http_200_error_envelope_in_a_batch_is_a_failed_line_batched_again(small):
    def script(i, body):
        return Reply(raw_body=ENVELOPE) if example_of(body) == "e1" else ok()

    with ScriptedServer(script) as srv:
        name = make_run(small, srv.base_url, "bin")
        summary = batch.run_batch_sync(small, name, interval_s=0.01)
    assert summary.status == "incomplete"
    failed = [c for c in calls(small, name) if c.status != "ok"]
    assert len(failed) == 1 and "HTTP 200 with an error body" in failed[0].error
    assert not [k for k in stored(small, name) if k[0] == "e1"]


# ---------------------------------------------------------------------------------- 10 MB reply


def test_a_10_mb_reply_is_stored_once_and_bounded(small):
    huge = json.dumps({"quality": {"verdict": 4, "rationale": "x" * (10 * 1024 * 1024)}})
    long_ok = json.dumps({"quality": {"verdict": 4, "rationale": "y" * 400_000}})  # under the parse limit
    with ScriptedServer(lambda i, body: ok(long_ok if example_of(body) == "e5" else huge)) as srv:
        name = make_run(small, srv.base_url, "sc")
        summary = runner.run_sync(small, name, concurrency=2)
    assert summary.status == "done"
    rows = calls(small, name)
    assert len(rows) == 6
    for c in rows:
        full = long_ok if c.response_chars == len(long_ok) else huge
        assert c.response_chars == len(full)
        assert c.response_sha256 == hashlib.sha256(full.encode()).hexdigest()
        assert len(c.response_text) <= 2 * RAW_EDGE + 100
        assert c.response_text.startswith(full[:1000]) and c.response_text.endswith(full[-1000:])
    got = stored(small, name)
    assert "parser reads" in got[("e0", "quality")].error and got[("e0", "quality")].value is None
    assert got[("e5", "quality")].value == 4 and len(got[("e5", "quality")].rationale) < 17_000
    with Session(small) as s:
        run_id = store.get_run(s, name).id
        text = s.scalar(select(func.sum(func.length(store.Call.response_text))).where(store.Call.run_id == run_id))
        rationale = s.scalar(select(func.coalesce(func.sum(func.length(store.Verdict.rationale)), 0))
                             .where(store.Verdict.run_id == run_id))
    assert text + rationale < 500_000  # 6 replies of up to 10 MB: well under a megabyte stored


# ----------------------------------------------------------------------- permanent per-example


def test_permanent_per_example_errors_are_recorded_without_tripping_the_breaker_or_the_ladder(small):
    refused = {"e0", "e1", "e2", "e3"}  # more in a row than the breaker allows

    def script(i, body):
        return status(400, message=CONTEXT_ERROR) if example_of(body) in refused else ok()

    with ScriptedServer(script) as srv:
        name = make_run(small, srv.base_url, "bin")
        summary = runner.run_sync(small, name, concurrency=1, breaker=2)
        formats, served = srv.formats, len(srv.requests)
        again = runner.run_sync(small, name, concurrency=1, breaker=2)
    assert summary.status == "done", summary.message
    assert summary.totals["rejected_calls"] == 4 and summary.totals["rejected_examples"] == 4
    assert "refused by the endpoint" in summary.message
    assert served == 6  # no retries of a permanent error
    assert set(formats) == {"json_schema"}  # the ladder stayed where it was
    got = stored(small, name)
    for e in refused:
        assert got[(e, "safe")].value is None and "maximum context length" in got[(e, "safe")].error
    assert got[("e4", "safe")].value == 1 and got[("e5", "helpful")].value == 1
    assert again.calls_sent == 0 and again.status == "done"  # resume does not send them again
    rejected = [c for c in calls(small, name) if c.status == "rejected"]
    assert len(rejected) == 4 and all(c.attempts == 1 for c in rejected)


def test_a_non_format_400_while_probing_does_not_move_the_ladder(small):
    script = [status(400, message="Invalid value for 'temperature': must be at most 2.")]
    with ScriptedServer(script) as srv:  # then echo replies
        name = make_run(small, srv.base_url, "bin")
        summary = runner.run_sync(small, name, concurrency=1)
        formats = srv.formats
    assert formats == ["json_schema"] * 6  # the failed call, then the other five, all in json_schema
    assert summary.status == "incomplete" and summary.totals["failed_calls"] == 1
    assert summary.totals["rejected_calls"] == 0  # not a per-example reason: an ordinary failure


# ------------------------------------------------------------------------------- parity details


def test_nul_bytes_surrogates_and_string_usage_store_the_same_on_both_backends(small):
    content = json.dumps({"safe": {"verdict": True, "rationale": "bad\u0000byte \ud800 end",
                                   "red_flags": ["nul\u0000flag"]},
                          "helpful": {"verdict": False, "rationale": "fine"}})
    body = {"id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": "n/a", "completion_tokens": "12", "total_tokens": True,
                      "prompt_tokens_details": {"cached_tokens": -3}}}
    with ScriptedServer(default=Reply(raw_body=json.dumps(body).encode())) as srv:
        name = make_run(small, srv.base_url, "bin")
        summary = runner.run_sync(small, name, concurrency=2)
    assert summary.status == "done", summary.message
    got = stored(small, name)
    assert got[("e0", "safe")].value == 1 and got[("e0", "helpful")].value == 0
    assert got[("e0", "safe")].rationale == "bad\ufffdbyte \ufffd end"
    assert got[("e0", "safe")].red_flags == ["nul\ufffdflag"]
    c = calls(small, name)[0]
    assert (c.prompt_tokens, c.completion_tokens, c.cached_tokens) == (None, 12, None)
    assert "\x00" not in c.response_text


@pytest.mark.parametrize(("usage", "expected"), [
    ({"prompt_tokens": 3_000_000_000, "completion_tokens": 5}, (None, 5, None)),  # beyond a 32-bit column
    ({"prompt_tokens": 2**62 - 1, "completion_tokens": 2**62 - 1}, (None, None, None)),  # SUM would overflow
    ({"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1_000_000}},
     (10, 5, None)),  # more cached than prompt tokens: not a discount on every other call
    ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}}, (100, 5, 64)),
])
def test_usage_no_call_can_have_is_unknown_and_the_run_completes_once(small, usage, expected):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": '{"safe": true, "helpful": true}'},
                         "finish_reason": "stop"}], "usage": usage}
    with ScriptedServer(default=Reply(raw_body=json.dumps(body).encode())) as srv:
        name = make_run(small, srv.base_url, "bin")
        summary = runner.run_sync(small, name, concurrency=4)
        sent = len(srv.requests)
    assert summary.status == "done", summary.message
    got = calls(small, name)
    assert sent == len(got)  # every call stored the first time: nothing to send again
    assert {(c.prompt_tokens, c.completion_tokens, c.cached_tokens) for c in got} == {expected}
    with Session(small) as s:
        assert reports.run_cost(s, store.get_run(s, name)) is not None  # totals and cost still add up


def test_logprobs_of_the_wrong_type_do_not_fail_the_run(small):
    content = '{"safe": true, "helpful": true}'
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                         "logprobs": {"content": [{"token": "{", "logprob": "n/a", "top_logprobs": "none"},
                                                  {"token": 7, "logprob": None}]}}]}
    with ScriptedServer(default=Reply(raw_body=json.dumps(body).encode())) as srv:
        name = make_run(small, srv.base_url, "bin", logprobs=True)
        summary = runner.run_sync(small, name, concurrency=2)
    assert summary.status == "done"
    assert all(v.value == 1 and v.p_pass is None for v in stored(small, name).values())
