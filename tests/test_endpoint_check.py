""""Test this endpoint" against real HTTP servers through the real openai client: the simulated judge, a
scripted server that refuses json_schema or answers nonsense, a dead port — and a key that never leaks."""

from __future__ import annotations

from judgekit import simjudge
from judgekit.client import JudgeConfig, forget_structured_modes
from judgekit.endpoint_check import check_endpoint
from judgekit.localjudge import free_port
from tests.scripted_server import ScriptedServer, malformed, status


def steps(check) -> dict[str, tuple[bool, str]]:
    return {s.name: (s.ok, s.detail) for s in check.steps}


def test_the_simulated_judge_passes_and_says_it_is_simulated():
    srv = simjudge.start_in_thread(None, simjudge.SimParams())
    try:
        check = check_endpoint(JudgeConfig(base_url=srv.base_url, model=simjudge.SIM_MODEL))
    finally:
        srv.stop()
    got = steps(check)
    assert check.ok and check.simulated
    assert got["models"] == (True, "judgekit-sim is listed (1 model)")
    assert got["structured output"] == (True, "json_schema")
    assert got["one tiny call"][0] and got["one tiny call"][1].startswith("a verdict (")


def test_a_server_that_refuses_json_schema_is_found_on_json_object():
    forget_structured_modes()
    with ScriptedServer(reject_json_schema=True) as srv:
        check = check_endpoint(JudgeConfig(base_url=srv.base_url, model="judgekit-test", max_retries=0))
        formats = srv.formats
    assert check.ok and not check.simulated and check.mode == "json_object"
    assert steps(check)["structured output"] == (True, "json_object (1 richer mode refused first)")
    assert formats == ["json_schema", "json_object"]  # exactly one tiny call after the refusal


def test_a_model_the_endpoint_does_not_list_fails_that_step_only():
    forget_structured_modes()
    with ScriptedServer() as srv:
        check = check_endpoint(JudgeConfig(base_url=srv.base_url, model="gpt-nonexistent", max_retries=0))
    got = steps(check)
    assert not check.ok
    assert got["models"] == (False, "gpt-nonexistent is not among the listed models: judgekit-test")
    assert got["one tiny call"][0]


def test_a_reply_that_is_not_a_verdict_is_reported_unscored_not_failed():
    forget_structured_modes()
    with ScriptedServer(default=malformed()) as srv:
        check = check_endpoint(JudgeConfig(base_url=srv.base_url, model="judgekit-test", max_retries=0))
    ok, detail = steps(check)["one tiny call"]
    assert not ok and detail.startswith("the reply was not a verdict (")


def test_a_dead_endpoint_is_one_line_and_stops_there():
    port = free_port()
    check = check_endpoint(JudgeConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=5,
                                       max_retries=0))
    assert [s.name for s in check.steps] == ["models"]
    assert check.steps[0].detail == f"could not connect to http://127.0.0.1:{port}/v1 (is the server running?)"


def test_the_key_never_appears_in_what_the_check_says(monkeypatch):
    secret = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("JK_CHECK_KEY", secret)
    forget_structured_modes()
    with ScriptedServer(default=status(401, message=f"Incorrect API key provided: {secret}")) as srv:
        check = check_endpoint(JudgeConfig(base_url=srv.base_url, model="judgekit-test", api_key_env="JK_CHECK_KEY",
                                           max_retries=0))
        sent = [r.headers.get("authorization") for r in srv.requests]
    assert sent and all(h == f"Bearer {secret}" for h in sent)  # the key was used …
    assert not check.ok
    text = " ".join(s.detail for s in check.steps)
    assert "401" in text and secret not in text and "0123456789abcdef" not in text  # … and never shown


def test_an_unset_key_variable_is_named_before_any_request(monkeypatch):
    monkeypatch.delenv("JK_UNSET_KEY", raising=False)
    check = check_endpoint(JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="JK_UNSET_KEY"))
    assert not check.ok and "JK_UNSET_KEY" in check.steps[0].detail
