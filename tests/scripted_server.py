"""A scripted OpenAI-compatible server for client tests, built on :mod:`judgekit.openai_server`.

Each completion request consumes the next *step* of a script (a list, or a function of the request
index). Steps are small constructors — :func:`ok`, :func:`status`, :func:`reset`, :func:`malformed`,
:func:`truncated`, :func:`truncated_body`, :func:`slow` — returning a :class:`Reply`. When the list
runs out, ``default`` answers (an ``ok`` echo of the schema unless told otherwise).

``reject_json_schema=True`` answers any ``{"type": "json_schema"}`` request with the error
llama.cpp's server gives (status ``reject_status``, 400 by default) *without* consuming a step;
``reject_response_format=True`` rejects every ``response_format`` (a server that takes neither).
Every request is recorded (body and lower-cased headers) for assertions.

The Files and Batch API routes are served too (see :class:`judgekit.openai_server.BatchBehaviour`):
each line of a batch consumes a script step like a live request would, so the same faults and
malformed replies land in the batch's output and error files. ``srv.batch`` is the (mutable)
behaviour; ``srv.api_requests`` records the Files/Batches requests, ``srv.count("POST", "/batches")``
counts them.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Sequence

from judgekit.openai_server import (
    BatchBehaviour,
    RecordedRequest,
    Reply,
    ServerStats,
    ServerThread,
    Usage,
    echo_reply,
)

Step = Reply | Callable[[dict], Reply]
Script = Sequence[Step] | Callable[[int, dict], Step]

LLAMA_CPP_JSON_SCHEMA_ERROR = (
    'response_format type must be one of "text" or "json_object", but got: json_schema'
)


def ok(content: str | dict | None = None, *, usage: Usage | None = None, logprobs=None, **kw) -> Step:
    """A 200 reply; ``content`` may be a dict (sent as JSON) or ``None`` (echo of the schema)."""
    if content is None:

        def echo(body: dict) -> Reply:
            reply = echo_reply(body)
            reply.usage, reply.logprobs = usage, logprobs
            return reply

        return echo
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(content=text, usage=usage, logprobs=logprobs, **kw)


def status(
    code: int,
    *,
    retry_after: float | None = None,
    retry_after_ms: float | None = None,
    message: str | None = None,
) -> Reply:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    return Reply(status=code, error=message, headers=headers)


def reset() -> Reply:
    """Close the connection without answering (a TCP reset)."""
    return Reply(reset=True)


def malformed(text: str = "Sure! The answer passes, I think. {verdict: maybe") -> Reply:
    """A 200 reply whose content is not usable JSON."""
    return Reply(content=text)


def truncated(
    content: str = '{"answers_question": {"verdict": true, "rationale": "The answer addre',
) -> Reply:
    """A 200 reply whose JSON content was cut off by ``max_tokens``."""
    return Reply(content=content, finish_reason="length")


def truncated_body() -> Reply:
    """Announce the full body, send half of it, close: an HTTP-level truncation."""
    return Reply(content='{"x": true}', truncate_body=True)


def slow(seconds: float, content: str | dict | None = None) -> Step:
    step = ok(content)
    if isinstance(step, Reply):
        step.delay_s = seconds
        return step

    def delayed(body: dict) -> Reply:
        reply = step(body)
        reply.delay_s = seconds
        return reply

    return delayed


class ScriptedServer:
    """``with ScriptedServer([status(429, retry_after=0.1), ok()]) as srv: srv.base_url``."""

    def __init__(
        self,
        script: Script = (),
        *,
        default: Step | None = None,
        reject_json_schema: bool = False,
        reject_response_format: bool = False,
        reject_status: int = 400,
        batch: BatchBehaviour | None = None,
    ) -> None:
        self.script = script
        self.default = default if default is not None else ok()
        self.reject_json_schema = reject_json_schema
        self.reject_response_format = reject_response_format
        self.reject_status = reject_status
        self.steps_used = 0
        self._lock = threading.Lock()
        self.batch = batch if batch is not None else BatchBehaviour(polls_to_complete=2)
        self._thread = ServerThread(self._handle, record=True, batch=self.batch)

    def _next_step(self, body: dict) -> Step:
        with self._lock:
            index = self.steps_used
            self.steps_used += 1
        if callable(self.script):
            return self.script(index, body)
        return self.script[index] if index < len(self.script) else self.default

    def _handle(self, body: dict) -> Reply:
        fmt = body.get("response_format")
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_schema" and (self.reject_json_schema or self.reject_response_format):
            return Reply(status=self.reject_status, error=LLAMA_CPP_JSON_SCHEMA_ERROR)
        if kind is not None and self.reject_response_format:
            return Reply(
                status=self.reject_status, error=f"Unrecognized request argument: response_format ({kind})"
            )
        step = self._next_step(body)
        reply = step(body) if callable(step) else step
        # Steps may be reused across requests; hand the server a fresh copy.
        return dataclasses.replace(reply)

    @property
    def base_url(self) -> str:
        return self._thread.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._thread.requests

    @property
    def stats(self) -> ServerStats:
        return self._thread.stats

    @property
    def api_requests(self) -> list[RecordedRequest]:
        """Files and Batches requests (uploads recorded as their form fields, not the file)."""
        return self._thread.api_requests

    def count(self, method: str, path_suffix: str) -> int:
        """How many Files/Batches requests had this method and a path ending in ``path_suffix``."""
        return sum(1 for r in self.api_requests if r.method == method and r.path.endswith(path_suffix))

    @property
    def formats(self) -> list[str]:
        """The response_format type of every completion request, in order ("none" if absent)."""
        out = []
        for r in self.requests:
            fmt = (r.body or {}).get("response_format")
            out.append(fmt.get("type", "?") if isinstance(fmt, dict) else "none")
        return out

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.stop()
