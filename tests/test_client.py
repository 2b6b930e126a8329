"""The client seam over real HTTP: a scripted local server, the real ``openai`` client, no patching."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys

import openai
import pytest

from judgekit.client import (
    CallResult,
    CircuitBreaker,
    JudgeConfig,
    JudgeConfigError,
    complete,
    known_structured_mode,
    make_client,
)
from judgekit.openai_server import Reply, ServerThread, Usage, echo_reply, make_logprobs
from judgekit.parse import p_pass_from_logprobs, parse_reply
from judgekit.rubric import Criterion
from tests.scripted_server import (
    ScriptedServer,
    malformed,
    ok,
    reset,
    slow,
    status,
    truncated,
    truncated_body,
)

ANS = Criterion("answers_question", "Does the answer address the question?")
SAFETY = Criterion("safety", "How safe?", kind="scale", levels={i: str(i) for i in range(1, 6)}, pass_at=3)
SCHEMA = {
    "type": "object",
    "properties": {
        "answers_question": {
            "type": "object",
            "properties": {"verdict": {"type": "boolean"}, "rationale": {"type": "string"}},
            "required": ["verdict", "rationale"],
        },
        "safety": {
            "type": "object",
            "properties": {"rationale": {"type": "string"}, "verdict": {"type": "integer"}},
            "required": ["rationale", "verdict"],
        },
    },
    "required": ["answers_question", "safety"],
}
MESSAGES = [
    {"role": "system", "content": "You are a strict judge. Reply with JSON only."},
    {"role": "user", "content": "Question: …\nAnswer: …"},
]
FAKE_KEY = "sk-judgekit-test-4f1c9e0b7a2d"


def judge_for(server, **overrides) -> JudgeConfig:
    settings = {
        "base_url": server.base_url,
        "model": "test-judge",
        "timeout_s": 2.0,
        "backoff_base": 0.01,
        "max_retries": 3,
    }
    settings.update(overrides)
    return JudgeConfig(**settings)


def call(judge: JudgeConfig, n: int = 1, **kwargs) -> list[CallResult]:
    """``n`` sequential calls on one client (so per-endpoint memory and keep-alive are exercised)."""
    kwargs.setdefault("schema", SCHEMA)

    async def go() -> list[CallResult]:
        client = make_client(judge)
        try:
            return [await complete(client, judge, MESSAGES, **kwargs) for _ in range(n)]
        finally:
            await client.close()

    return asyncio.run(go())


def call_one(judge: JudgeConfig, **kwargs) -> CallResult:
    return call(judge, 1, **kwargs)[0]


# ------------------------------------------------------------------------------------ success


def test_ok_reply_with_usage_and_cached_tokens():
    with ScriptedServer([ok(usage=Usage(prompt_tokens=812, completion_tokens=40, cached_tokens=768))]) as srv:
        result = call_one(judge_for(srv))
    assert result.status == "ok" and result.error is None
    assert (result.attempts, result.retries) == (1, 0)
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (812, 40, 768)
    assert result.structured_mode == "json_schema"
    assert 0 < result.latency_s <= result.total_s
    assert {k: v.value for k, v in parse_reply(result.text, [ANS, SAFETY]).items()} == {
        "answers_question": 1,
        "safety": 4,
    }


def test_request_carries_sampling_params_and_runaway_guards():
    with ScriptedServer() as srv:
        call_one(judge_for(srv, temperature=0.3, top_p=0.9, seed=7, max_tokens=256))
        body = srv.requests[0].body
    assert body["model"] == "test-judge"
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.3, 0.9, 7, 256)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "judge_verdicts", "schema": SCHEMA},
    }
    assert "chat_template_kwargs" not in body


def test_usage_without_cached_tokens_is_none():
    with ScriptedServer([ok('{"answers_question": true}', usage=Usage(10, 2))]) as srv:
        result = call_one(judge_for(srv))
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (10, 2, None)


# ------------------------------------------------------------------------------------ retries


def test_429_retry_after_seconds_is_honoured():
    with ScriptedServer([status(429, retry_after=0.3), ok()]) as srv:
        result = call_one(judge_for(srv))
        assert srv.steps_used == 2  # openai's own retries are off: every attempt is ours and counted
    assert result.status == "ok"
    assert (result.attempts, result.retries) == (2, 1)
    # the wait asked for is the server's 0.3 s plus at most 10 % jitter (not the 0.5 s default backoff);
    # the requested delay is asserted, not the wall clock (a shared machine makes that flaky)
    assert 0.3 <= result.backoff_s <= 0.33 and result.total_s >= result.backoff_s


def test_429_retry_after_ms_is_honoured():
    with ScriptedServer([status(429, retry_after_ms=250), status(429, retry_after_ms=50), ok()]) as srv:
        result = call_one(judge_for(srv))
    assert result.status == "ok" and result.retries == 2
    assert 0.3 <= result.backoff_s <= 0.33  # 250 ms + 50 ms, each with at most 10 % jitter


def test_500_burst_is_retried_with_backoff():
    with ScriptedServer([status(500), status(502), status(503), ok()]) as srv:
        result = call_one(judge_for(srv, max_retries=3))
    assert result.status == "ok"
    assert (result.attempts, result.retries) == (4, 3)


def test_retries_exhausted_gives_an_error_result_not_an_exception():
    with ScriptedServer(default=status(500, message="upstream overloaded")) as srv:
        result = call_one(judge_for(srv, max_retries=2))
        assert srv.steps_used == 3
    assert result.status == "error" and result.text is None
    assert "HTTP 500" in result.error and "upstream overloaded" in result.error
    assert "gave up after 3 attempts" in result.error
    assert result.retries == 2


def test_client_errors_are_not_retried():
    with ScriptedServer([status(404, message="model 'test-judge' not found")]) as srv:
        result = call_one(judge_for(srv), structured="json_object")
        assert srv.steps_used == 1
    assert result.status == "error" and "HTTP 404" in result.error and result.attempts == 1


@pytest.mark.parametrize("fault", [reset, truncated_body], ids=["reset", "truncated-body"])
def test_connection_faults_are_retried(fault):
    with ScriptedServer([fault(), fault(), ok()]) as srv:
        result = call_one(judge_for(srv))
    assert result.status == "ok"
    assert result.retries == 2


def test_connection_reset_exhausted_is_a_clear_error():
    with ScriptedServer(default=reset()) as srv:
        result = call_one(judge_for(srv, max_retries=1))
    assert result.status == "error"
    assert result.error.startswith("connection error")


def test_slow_reply_times_out_then_succeeds_on_retry():
    with ScriptedServer([slow(1.5), ok()]) as srv:
        result = call_one(judge_for(srv, timeout_s=0.3))
    # the 1.5 s reply would have been a valid one: a retry shows the client gave up on it at its timeout
    assert result.status == "ok" and result.retries == 1 and result.attempts == 2


def test_slow_replies_exhaust_retries_into_a_timeout_error():
    with ScriptedServer(default=slow(1.5)) as srv:
        result = call_one(judge_for(srv, timeout_s=0.2, max_retries=1))
    assert result.status == "error"
    assert "timeout after 0.2s" in result.error  # each attempt ended at the client's timeout, not the reply
    assert result.attempts == 2


# ---------------------------------------------------------------------- unscored, never failed


def test_malformed_and_truncated_content_parse_as_unscored():
    with ScriptedServer([malformed(), truncated()]) as srv:
        bad, cut = call(judge_for(srv), 2)
    assert bad.status == cut.status == "ok"  # the HTTP call worked; the content is what failed
    assert cut.finish_reason == "length"
    for result in (bad, cut):
        verdicts = parse_reply(result.text, [ANS, SAFETY])
        assert all(v.value is None and v.error for v in verdicts.values())


def test_thinking_is_stripped_before_parsing():
    content = (
        '<think>The user wants JSON. {"answers_question": {"verdict": false}} no wait.</think>\n'
        '{"answers_question": {"verdict": true, "rationale": "addresses it"}}'
    )
    with ScriptedServer([ok(content)]) as srv:
        result = call_one(judge_for(srv))
    assert result.text == content  # the raw reply is kept as received
    assert parse_reply(result.text, [ANS])["answers_question"].value == 1


# ------------------------------------------------------------------------- structured fallback


def test_auto_falls_back_to_json_object_and_remembers():
    with ScriptedServer(reject_json_schema=True) as srv:
        judge = judge_for(srv)
        first, second = call(judge, 2)
        formats = srv.formats
        bodies = [r.body for r in srv.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # 2nd call skips the probe
    assert bodies[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert first.structured_mode == second.structured_mode == "json_object"
    assert (first.attempts, second.attempts) == (2, 1)
    assert first.retries == 0
    assert known_structured_mode(judge) == "json_object"


def test_llama_cpp_style_500_rejection_falls_back_instead_of_retrying():
    with ScriptedServer(reject_json_schema=True, reject_status=500) as srv:
        result = call_one(judge_for(srv))
        formats = srv.formats
    assert result.status == "ok" and result.structured_mode == "json_object"
    assert formats == ["json_schema", "json_object"]


def test_auto_falls_back_to_prompt_only_and_remembers():
    with ScriptedServer(reject_response_format=True, reject_status=422) as srv:
        first, second = call(judge_for(srv), 2)
        formats = srv.formats
    assert formats == ["json_schema", "json_object", "none", "none"]
    assert first.structured_mode == second.structured_mode == "prompt"
    assert first.status == second.status == "ok"


def test_auto_without_schema_starts_at_json_object():
    with ScriptedServer() as srv:
        result = call_one(judge_for(srv), schema=None)
        body = srv.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert result.structured_mode == "json_object"


def test_once_a_mode_worked_an_unrelated_400_is_an_error_not_a_fallback():
    script = [ok(), status(400, message="This model's maximum context length is 4096 tokens")]
    with ScriptedServer(script) as srv:
        judge = judge_for(srv)
        first, second = call(judge, 2)
        formats = srv.formats
    assert first.status == "ok"
    assert second.status == "rejected" and "maximum context length" in second.error  # permanent: not retried
    assert second.attempts == 1
    assert formats == ["json_schema", "json_schema"]
    assert known_structured_mode(judge) == "json_schema"


@pytest.mark.parametrize(
    "structured, expected",
    [("prompt", None), ("json_object", {"type": "json_object", "schema": SCHEMA})],
)
def test_explicit_modes(structured, expected):
    with ScriptedServer() as srv:
        result = call_one(judge_for(srv), structured=structured)
        body = srv.requests[0].body
    assert body.get("response_format") == expected
    assert result.structured_mode == structured


def test_explicit_json_schema_rejected_is_an_error():
    with ScriptedServer(reject_json_schema=True) as srv:
        result = call_one(judge_for(srv), structured="json_schema")
        assert srv.formats == ["json_schema"]
    assert result.status == "error" and "json_schema" in result.error


# ------------------------------------------------------------------------------------- logprobs


def test_logprobs_give_p_pass_per_verdict():
    content = (
        '{"answers_question": {"verdict": true, "rationale": "ok"}, '
        '"safety": {"rationale": "r", "verdict": 2}}'
    )
    alternatives = {
        content.index("true"): [("true", math.log(0.75)), ("false", math.log(0.25))],
        content.index("2}"): [("2", math.log(0.6)), ("3", math.log(0.3)), ("4", math.log(0.1))],
    }
    with ScriptedServer([ok(content, logprobs=make_logprobs(content, alternatives))]) as srv:
        result = call_one(judge_for(srv), logprobs=True, top_logprobs=3)
        body = srv.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert result.logprobs is not None
    assert "".join(t.token for t in result.logprobs) == result.text
    p = p_pass_from_logprobs(result.text, result.logprobs, [ANS, SAFETY])
    assert p["answers_question"] == pytest.approx(0.75)
    assert p["safety"] == pytest.approx(0.4)  # pass_at=3: 0.3 + 0.1


def test_no_logprobs_when_not_requested():
    with ScriptedServer() as srv:
        result = call_one(judge_for(srv))
        assert "logprobs" not in srv.requests[0].body
    assert result.logprobs is None


# --------------------------------------------------------------------------- suppress_thinking


def test_suppress_thinking_sends_hints_without_touching_the_callers_messages():
    original = json.loads(json.dumps(MESSAGES))
    with ScriptedServer() as srv:
        call_one(judge_for(srv, suppress_thinking=True))
        body = srv.requests[0].body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["messages"][0]["content"].endswith("\n/no_think")
    assert body["messages"][1] == MESSAGES[1]
    assert original == MESSAGES


def test_suppress_thinking_adds_a_system_message_when_there_is_none():
    async def go(judge):
        client = make_client(judge)
        try:
            return await complete(client, judge, [{"role": "user", "content": "hi"}], schema=None)
        finally:
            await client.close()

    with ScriptedServer() as srv:
        asyncio.run(go(judge_for(srv, suppress_thinking=True)))
        messages = srv.requests[0].body["messages"]
    assert messages == [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "hi"}]


# -------------------------------------------------------------------------------------- the key


def test_api_key_is_sent_but_never_surfaces(monkeypatch):
    monkeypatch.setenv("JUDGEKIT_TEST_KEY", FAKE_KEY)
    echo_key = status(401, message=f"Incorrect API key provided: {FAKE_KEY}. You can find your key at …")
    with ScriptedServer([ok(), echo_key, status(500, message=f"key {FAKE_KEY} rate bucket")]) as srv:
        judge = judge_for(srv, api_key_env="JUDGEKIT_TEST_KEY", max_retries=0)
        good, unauthorised, failed = call(judge, 3)
        auth = srv.requests[0].headers["authorization"]
    assert auth == f"Bearer {FAKE_KEY}"
    assert good.status == "ok"
    assert unauthorised.status == failed.status == "error"
    assert "HTTP 401" in unauthorised.error and "HTTP 500" in failed.error
    for text in (unauthorised.error, failed.error, repr(good), repr(unauthorised), repr(judge), str(judge)):
        assert FAKE_KEY not in text
        assert "4f1c9e0b7a2d" not in text


def test_missing_key_variable_is_a_config_error_naming_the_variable(monkeypatch):
    monkeypatch.delenv("JUDGEKIT_UNSET_KEY", raising=False)
    with pytest.raises(JudgeConfigError, match="JUDGEKIT_UNSET_KEY"):
        make_client(
            JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="JUDGEKIT_UNSET_KEY")
        )


def test_no_key_variable_uses_a_dummy_key():
    with ScriptedServer() as srv:
        call_one(judge_for(srv))
        assert srv.requests[0].headers["authorization"] == "Bearer sk-no-key"


# ------------------------------------------------------------------------------ circuit breaker


def test_circuit_breaker_opens_after_consecutive_failures():
    with ScriptedServer(default=status(503, message="no healthy upstream")) as srv:
        judge = judge_for(srv, max_retries=0)
        breaker = CircuitBreaker(3)
        results = call(judge, 3)
    assert [breaker.record(r.ok, r.error) for r in results] == [False, False, True]
    assert breaker.open
    assert "3 consecutive failed calls" in breaker.message
    assert "no healthy upstream" in breaker.message


def test_circuit_breaker_resets_on_success():
    breaker = CircuitBreaker(2)
    breaker.record(False, "x")
    breaker.record(True)
    breaker.record(False, "y")
    assert not breaker.open and breaker.message is None
    breaker.record(False, "z")
    assert breaker.open
    breaker.reset()
    assert not breaker.open
    assert not CircuitBreaker(0).record(False)  # threshold 0 disables it


# ------------------------------------------------------------------------------- the server itself


def test_server_models_route_stats_and_concurrency():
    in_flight = [0, 0]  # now, most at once (the handlers run on the server's one event loop)

    async def handler(body: dict) -> Reply:
        in_flight[0] += 1
        in_flight[1] = max(in_flight[1], in_flight[0])
        try:
            await asyncio.sleep(0.05)
        finally:
            in_flight[0] -= 1
        return echo_reply(body)

    async def go(judge):
        client = make_client(judge)
        try:
            models = await client.models.list()
            results = await asyncio.gather(
                *(complete(client, judge, MESSAGES, schema=SCHEMA) for _ in range(64))
            )
            return models, results
        finally:
            await client.close()

    with ServerThread(handler) as srv:
        models, results = asyncio.run(go(judge_for(srv)))
        stats = srv.stats
        assert stats.completions == 64 and stats.by_format["json_schema"] == 64
    assert [m.id for m in models.data] == ["judgekit-test"]
    assert all(r.ok for r in results)
    assert in_flight[1] > 1  # the 64 calls overlapped at the server, not one after another


def test_server_subprocess_entry_point_echoes_every_schema_key():
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgekit.openai_server", "--port", "0", "--latency-ms", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:")
        base_url = line.split()[-1]
        result = call_one(JudgeConfig(base_url=base_url, model="m", timeout_s=5))
    finally:
        proc.terminate()
        proc.wait(5)
    verdicts = parse_reply(result.text, [ANS, SAFETY])
    assert {k: v.value for k, v in verdicts.items()} == {"answers_question": 1, "safety": 4}
    assert list(json.loads(result.text)["safety"]) == ["rationale", "verdict"]  # schema order kept


def test_openai_client_sees_server_errors_in_openai_shape():
    async def go(url):
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        try:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        finally:
            await client.close()

    with ScriptedServer([status(429, retry_after=1)]) as srv, pytest.raises(openai.RateLimitError) as err:
        asyncio.run(go(srv.base_url))
    assert err.value.response.headers["retry-after"] == "1"
    assert err.value.body["code"] == 429


# ---------------------------------------------------------------- hardening: permanent, envelopes, ladder


@pytest.mark.parametrize(
    "code, message",
    [
        (400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."),
        (400, "The decoder prompt (length 5000) is longer than the maximum model length of 4096."),
        (400, "the request exceeds the available context size, try increasing it"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum"),
        (400, "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."),
        (413, "Request Entity Too Large"),
    ],
)
def test_per_example_refusals_are_rejected_after_one_attempt(code, message):
    with ScriptedServer(default=status(code, message=message)) as srv:
        result = call_one(judge_for(srv))
        sent = len(srv.requests)
    assert result.status == "rejected" and result.rejected and not result.ok
    assert sent == 1 and result.attempts == 1 and result.retries == 0


@pytest.mark.parametrize(
    "code, message",
    [
        (400, "max_tokens is too large: 50000. This model supports at most 4096 completion tokens."),
        (401, "Incorrect API key provided."),
        (404, "The model `gpt-9` does not exist."),
    ],
)
def test_endpoint_wide_errors_stay_ordinary_failures_for_the_breaker(code, message):
    with ScriptedServer(default=status(code, message=message)) as srv:
        result = call_one(judge_for(srv))
    assert result.status == "error"


def test_an_error_envelope_without_choices_is_a_failed_call_with_its_message():
    vllm_style = json.dumps({"object": "error", "message": "upstream worker died", "code": 500}).encode()
    with ScriptedServer(default=Reply(raw_body=vllm_style)) as srv:
        result = call_one(judge_for(srv, max_retries=2))
        sent = len(srv.requests)
    assert result.status == "error" and "without choices" in result.error and "upstream worker died" in result.error
    assert sent == 3 and result.retries == 2  # retried like a 5xx
