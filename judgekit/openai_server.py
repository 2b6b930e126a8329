"""A minimal OpenAI-compatible HTTP server (pure asyncio) for tests, simulated judges and benchmarks.

It speaks just enough of the Chat Completions API for the ``openai`` client: ``POST
/v1/chat/completions`` and ``GET /v1/models`` over HTTP/1.1 keep-alive — and enough of the Files and
Batch APIs (``POST /v1/files``, ``GET /v1/files/{id}[/content]``, ``POST``/``GET /v1/batches``,
``GET /v1/batches/{id}``) to run an OpenAI batch against it; see :class:`BatchBehaviour`. What it
answers is decided by a *handler*::

    async def handler(request: dict) -> Reply      # or a plain function; request = the JSON body

A :class:`Reply` carries either ``content`` (wrapped into a ``chat.completion``) or an HTTP ``status``
with an ``error`` body, plus extra ``headers`` (``Retry-After``…), a ``delay_s`` before answering,
``usage`` and ``logprobs``, and two fault actions: ``reset`` (close the socket without answering) and
``truncate_body`` (announce the full ``Content-Length``, send half, close).

Two ways to run it:

* in-process, in a background thread: ``with ServerThread(handler) as srv: srv.base_url``;
* as its own process: ``python -m judgekit.openai_server --port 8011 --latency-ms 20`` serves
  :func:`echo_reply` — a valid verdict object for every criterion key in the request's
  ``response_format`` schema — and prints ``listening on http://HOST:PORT/v1`` once ready.

Requests are counted (:class:`ServerStats`, also by ``response_format`` type) so tests can assert on
what a client actually sent.

**Batches.** An uploaded batch file is answered line by line through the same *handler* as live
requests, so scripted faults and malformed replies show up in the output (200s) and error
(4xx/5xx) files exactly as they would live. A batch finishes on the ``polls_to_complete``-th
``GET /v1/batches/{id}``; :class:`BatchBehaviour` can make it ``failed`` or ``expired`` instead,
or route chosen lines to the error file as batch-level errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judgekit.parse import TokenLogprob

__all__ = [
    "BatchBehaviour",
    "RecordedRequest",
    "Reply",
    "ServerStats",
    "ServerThread",
    "Usage",
    "echo_reply",
    "make_logprobs",
    "serve",
    "serve_until_interrupted",
    "tokenize",
]

Handler = Callable[[dict], "Reply | Awaitable[Reply]"]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
MAX_BODY = 32 * 1024 * 1024
_TIMER_SLACK_S = 0.001


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None


@dataclass
class Reply:
    """What the server does with one request.

    ``content`` → a 200 ``chat.completion``. ``status`` ≥ 400 → an error response whose body is
    ``error`` (a dict sent as-is, or a message string wrapped in OpenAI's ``{"error": {…}}`` shape).
    ``usage`` defaults to a ~len/4 estimate. ``logprobs`` is a list of :class:`TokenLogprob`
    (see :func:`make_logprobs`), emitted in OpenAI's ``choices[0].logprobs.content`` shape.
    ``raw_body`` sends those bytes verbatim as the 200 body (a malformed envelope).
    """

    content: str | None = None
    status: int = 200
    error: dict | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    usage: Usage | None = None
    logprobs: Sequence[TokenLogprob] | None = None
    finish_reason: str = "stop"
    reset: bool = False
    truncate_body: bool = False
    raw_body: bytes | None = None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict | None


@dataclass
class ServerStats:
    """Counters a test or benchmark can read (from any thread; plain ints under the GIL)."""

    requests: int = 0
    completions: int = 0
    by_format: Counter = field(default_factory=Counter)  # response_format type, or "none"
    by_status: Counter = field(default_factory=Counter)
    connections: int = 0
    batch_lines: int = 0  # batch-file lines answered through the handler


# ------------------------------------------------------------------------------------- tokens


_TOKEN = re.compile(r"\s*[A-Za-z]+|\s*\d|\s*[^\sA-Za-z\d]|\s+")


def tokenize(text: str) -> list[str]:
    """A crude tokenisation whose pieces concatenate back to ``text`` exactly.

    Words (with their leading whitespace) are one token, digits and punctuation one character each
    — close enough to a BPE vocabulary for verdict positions (`` true``, ``4``) to be single tokens.
    """
    return _TOKEN.findall(text)


def make_logprobs(
    text: str, alternatives: Mapping[int, Sequence[tuple[str, float]]] | None = None
) -> list[TokenLogprob]:
    """Token log-probabilities for ``text``: every token certain (logprob 0) unless overridden.

    ``alternatives`` maps a *character offset* in ``text`` to the top alternatives (token, logprob)
    for the token covering that offset — e.g. ``{offset_of_verdict: [("true", log 0.8), ("false",
    log 0.2)]}``. The chosen token's own logprob is taken from its entry in the list when present.
    """
    alternatives = alternatives or {}
    out: list[TokenLogprob] = []
    pos = 0
    pending = sorted(alternatives.items())
    k = 0
    for tok in tokenize(text):
        end = pos + len(tok)
        top: tuple[tuple[str, float], ...] = ((tok, 0.0),)
        logprob = 0.0
        while k < len(pending) and pending[k][0] < end:
            if pending[k][0] >= pos:
                top = tuple(pending[k][1])
                logprob = dict(top).get(tok, dict(top).get(tok.strip(), 0.0))
            k += 1
        out.append(TokenLogprob(tok, logprob, top))
        pos = end
    return out


def _logprobs_json(items: Sequence[TokenLogprob]) -> dict:
    def entry(token: str, logprob: float) -> dict:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    return {
        "content": [
            {**entry(t.token, t.logprob), "top_logprobs": [entry(a, lp) for a, lp in t.top]} for t in items
        ],
        "refusal": None,
    }


# -------------------------------------------------------------------------------- echo handler


def _schema_of(body: dict) -> dict | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        return inner.get("schema") if isinstance(inner, dict) else None
    schema = fmt.get("schema")
    return schema if isinstance(schema, dict) else None


def _echo_entry(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return True
    kind = prop.get("type")
    if kind == "object":
        sub = prop.get("properties") or {}
        out = {}
        for name, p in sub.items():
            if name == "verdict":
                out[name] = _echo_entry(p)
            elif name == "red_flags":
                out[name] = []
            else:
                out[name] = "Looks fine."
        return out
    if kind == "integer" or "enum" in prop and all(isinstance(v, int) for v in prop["enum"]):
        return 4
    return True


def echo_reply(body: dict) -> Reply:
    """A fixed valid reply: one verdict per criterion key in the request's ``response_format`` schema.

    Binary properties answer ``true``, integer ones ``4``; object properties answer with their own
    keys in schema order (so ``verdict_first``/``reasoning_first`` layouts are honoured). Without a
    schema the reply is a bare ``{"verdict": true, "rationale": …}``.
    """
    schema = _schema_of(body)
    props = (schema or {}).get("properties")
    if isinstance(props, dict) and props:
        obj = {key: _echo_entry(p) for key, p in props.items()}
    else:
        obj = {"verdict": True, "rationale": "Looks fine."}
    return Reply(content=json.dumps(obj))


# -------------------------------------------------------------------------------------- server


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _prompt_text(body: dict) -> str:
    parts = []
    for m in body.get("messages") or ():
        if isinstance(m, dict):
            c = m.get("content")
            parts.append(c if isinstance(c, str) else json.dumps(c))
    return "".join(parts)


class _Server:
    """The asyncio side: one task per connection, requests served in order on each."""

    def __init__(
        self,
        handler: Handler,
        *,
        record: bool,
        model: str,
        owned_by: str,
        batch: BatchBehaviour | None = None,
    ) -> None:
        self.handler = handler
        self.owned_by = owned_by
        self.record = record
        self.model = model
        self.stats = ServerStats()
        self.requests: list[RecordedRequest] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._counter = 0
        self.api_requests: list[RecordedRequest] = []  # Files / Batches requests (body: JSON or form fields)
        self.batches = _BatchStore(self, batch if batch is not None else BatchBehaviour())

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                keep_going = await self._one(head, reader, writer)
                if not keep_going:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _one(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        arrived = asyncio.get_running_loop().time()
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            await self._send(writer, 400, {"error": {"message": "bad request line"}}, close=True)
            return False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        try:  # Content-Length bodies only: the openai client never sends chunked requests
            length = int(headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            await self._send(
                writer, 413, {"error": {"message": "bad or too large content-length"}}, close=True
            )
            return False
        raw = await reader.readexactly(length) if length else b""
        close = headers.get("connection", "").lower() == "close"
        path = target.split("?", 1)[0].rstrip("/")
        self.stats.requests += 1

        if method == "GET" and path.endswith("/models"):
            models = {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "owned_by": self.owned_by}],
            }
            await self._send(writer, 200, models, close=close)
            return not close
        routed = await self.batches.route(method, path, headers, raw)
        if routed is not None:
            code, payload, content_type = routed
            await self._send(writer, code, payload, close=close, content_type=content_type)
            return not close
        if method != "POST" or not path.endswith("/chat/completions"):
            await self._send(writer, 404, {"error": {"message": f"no route {method} {path}"}}, close=close)
            return not close

        try:
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            await self._send(writer, 400, _error_body(400, f"invalid JSON body: {exc}"), close=close)
            return not close
        self.stats.completions += 1
        fmt = body.get("response_format")
        self.stats.by_format[fmt.get("type", "?") if isinstance(fmt, dict) else "none"] += 1
        if self.record:
            self.requests.append(RecordedRequest(method, path, headers, body))

        try:
            reply = self.handler(body)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:  # a handler bug must surface as a 500, not a hung client
            reply = Reply(status=500, error=f"handler error: {type(exc).__name__}: {exc}")
        if reply.delay_s > 0:
            # Latency counts from the request's arrival, not the handler's return. The selector
            # rounds timer waits up to whole milliseconds and the kernel adds its own slack; aiming
            # 1 ms early makes the measured single-request latency the nominal one (20 ms → ~20.0 ms).
            remaining = arrived + reply.delay_s - asyncio.get_running_loop().time() - _TIMER_SLACK_S
            if remaining > 0:
                await asyncio.sleep(remaining)
        self.stats.by_status[reply.status] += 1

        if reply.reset:
            _reset(writer)
            return False
        if reply.status >= 400:
            err = reply.error if isinstance(reply.error, dict) else _error_body(reply.status, reply.error)
            await self._send(writer, reply.status, err, headers=reply.headers, close=close)
            return not close
        payload = reply.raw_body if reply.raw_body is not None else json.dumps(self._completion(body, reply)).encode()
        await self._send(
            writer, reply.status, payload, headers=reply.headers, close=close, truncate=reply.truncate_body
        )
        return not (close or reply.truncate_body)

    def _completion(self, body: dict, reply: Reply) -> dict:
        self._counter += 1
        content = reply.content or ""
        if reply.usage is not None:
            usage = reply.usage
        else:
            usage = Usage(_estimate_tokens(_prompt_text(body)), _estimate_tokens(content))
        usage_json: dict[str, Any] = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        }
        if usage.cached_tokens is not None:
            usage_json["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
        return {
            "id": f"chatcmpl-{self._counter}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "logprobs": _logprobs_json(reply.logprobs) if reply.logprobs is not None else None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": usage_json,
        }

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: dict | bytes,
        *,
        headers: Mapping[str, str] | None = None,
        close: bool = False,
        truncate: bool = False,
        content_type: str = "application/json",
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
            f"content-type: {content_type}\r\ncontent-length: {len(data)}\r\n"
            f"{'connection: close' if close or truncate else 'connection: keep-alive'}\r\n{extra}\r\n"
        ).encode("latin-1")
        try:
            if truncate:
                writer.write(head + data[: len(data) // 2])
                await writer.drain()
                _reset(writer)
                return
            writer.write(head + data)
            await writer.drain()
        except ConnectionError:
            pass

    def close_connections(self) -> None:
        for w in list(self._writers):
            with contextlib.suppress(Exception):
                w.close()


def _error_body(status: int, message: str | None) -> dict:
    return {
        "error": {
            "message": message or _REASONS.get(status, "error"),
            "type": _ERROR_TYPES.get(status, "server_error"),
            "code": status,
        }
    }


def _reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0) rather than a clean FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport = writer.transport
    transport.abort()


# ------------------------------------------------------------------------------------ batches


@dataclass
class BatchBehaviour:
    """How the Batch API routes behave. Mutable: a test may change it between two batches.

    ``polls_to_complete``: the batch reaches its final status on this ``GET /v1/batches/{id}`` (it is
    ``validating`` before the first poll, ``in_progress`` in between). ``outcome``: ``completed``,
    ``failed`` (no output; ``failure_message`` in ``errors``) or ``expired`` (only the first
    ``expire_after`` lines were answered). ``line_error(custom_id)`` may return a batch-level error
    ``{"code": …, "message": …}``: that line goes to the error file with ``response: null``.
    """

    polls_to_complete: int = 2
    outcome: str = "completed"
    expire_after: int = 0
    failure_message: str = "The batch could not be processed (simulated failure)."
    line_error: Callable[[str], dict | None] | None = None


_BATCH_ROUTE = re.compile(r"/(files|batches)(?:/([^/]+))?(?:/(content))?$")


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The parts of a ``multipart/form-data`` body: field name → (filename, content). Minimal."""
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if m is None:
        raise ValueError("multipart body without a boundary")
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in raw.split(b"--" + m.group(1).encode("latin-1"))[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        header_lines = head.decode("latin-1").split("\r\n")
        disposition = next((ln for ln in header_lines if ln.lower().startswith("content-disposition")), "")
        name = re.search(r'\bname="([^"]*)"', disposition)
        filename = re.search(r'\bfilename="([^"]*)"', disposition)
        if name:
            out[name.group(1)] = (filename.group(1) if filename else None, content.removesuffix(b"\r\n"))
    return out


class _BatchStore:
    """Files and batches held in memory, answered through the server's handler on completion."""

    def __init__(self, server: _Server, behaviour: BatchBehaviour) -> None:
        self.server = server
        self.behaviour = behaviour
        self.files: dict[str, dict] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.polls: Counter = Counter()
        self._ids = 0

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:06d}"

    def _file(self, data: bytes, filename: str, purpose: str) -> dict:
        fid = self._id("file-")
        self.files[fid] = {
            "id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
            "filename": filename, "purpose": purpose, "status": "processed",
        }
        self.contents[fid] = data
        return self.files[fid]

    async def route(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict | bytes, str] | None:
        m = _BATCH_ROUTE.search(path)
        if m is None:
            return None
        kind, ident, sub = m.groups()
        record = self.server.record
        try:
            if kind == "files" and method == "POST" and ident is None:
                parts = _multipart(headers.get("content-type", ""), raw)
                if "file" not in parts:
                    return 400, _error_body(400, "missing 'file' part"), "application/json"
                filename, data = parts["file"]
                purpose = parts.get("purpose", (None, b""))[1].decode()
                if record:
                    self.server.api_requests.append(
                        RecordedRequest(method, path, headers, {"purpose": purpose, "filename": filename})
                    )
                return 200, self._file(data, filename or "upload.jsonl", purpose), "application/json"
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            return 400, _error_body(400, f"invalid body: {exc}"), "application/json"
        if record:
            self.server.api_requests.append(RecordedRequest(method, path, headers, body))
        if kind == "files" and method == "GET" and ident in self.files:
            if sub == "content":
                return 200, self.contents[ident], "application/octet-stream"
            return 200, self.files[ident], "application/json"
        if kind == "batches" and method == "POST" and ident is None and isinstance(body, dict):
            return self._create(body)
        if kind == "batches" and method == "GET" and ident is None:
            data = sorted(self.batches.values(), key=lambda b: b["id"], reverse=True)
            return 200, {"object": "list", "data": data, "has_more": False,
                         "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None}, "application/json"
        if kind == "batches" and method == "GET" and ident in self.batches:
            await self._advance(ident)
            return 200, self.batches[ident], "application/json"
        return 404, _error_body(404, f"no {kind[:-1]} {ident!r} for {method} {path}"), "application/json"

    def _create(self, body: dict) -> tuple[int, dict, str]:
        input_id = body.get("input_file_id")
        if input_id not in self.files:
            return 400, _error_body(400, f"no such file: {input_id!r}"), "application/json"
        if body.get("completion_window") != "24h":
            return 400, _error_body(400, "completion_window must be 24h"), "application/json"
        now = int(time.time())
        bid = self._id("batch_")
        self.batches[bid] = {
            "id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
            "input_file_id": input_id, "completion_window": "24h", "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": now, "expires_at": now + 86400,
            "in_progress_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        return 200, self.batches[bid], "application/json"

    def _validate(self, batch: dict) -> tuple[list[dict], list[dict]]:
        """The input file's request lines, and OpenAI-style validation errors (which fail the batch)."""
        lines, errors, seen = [], [], set()
        for n, text in enumerate(self.contents[batch["input_file_id"]].decode().splitlines(), 1):
            try:
                line = json.loads(text)
            except ValueError:
                errors.append({"code": "invalid_json_line", "line": n, "message": "not JSON", "param": None})
                continue
            cid = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(cid, str) or cid in seen:
                errors.append({"code": "duplicate_custom_id" if cid in seen else "missing_custom_id",
                               "line": n, "message": f"custom_id {cid!r}", "param": "custom_id"})
            elif line.get("method") != "POST" or line.get("url") != batch["endpoint"]:
                errors.append({"code": "invalid_url", "line": n, "message": "wrong method or url",
                               "param": "url"})
            else:
                seen.add(cid)
                lines.append(line)
        if not lines and not errors:
            errors.append({"code": "empty_file", "line": None, "message": "no requests", "param": None})
        return lines, errors

    async def _advance(self, bid: str) -> None:
        batch = self.batches[bid]
        if batch["status"] not in ("validating", "in_progress"):
            return
        self.polls[bid] += 1
        now = int(time.time())
        lines, errors = self._validate(batch)
        batch["request_counts"]["total"] = len(lines)
        if errors:
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": errors})
            return
        if self.polls[bid] < max(1, self.behaviour.polls_to_complete):
            batch.update(status="in_progress", in_progress_at=batch["in_progress_at"] or now)
            return
        outcome = self.behaviour.outcome
        if outcome == "failed":
            message = self.behaviour.failure_message
            err = {"code": "batch_failed", "line": None, "message": message, "param": None}
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [err]})
            return
        answered = lines[: self.behaviour.expire_after] if outcome == "expired" else lines
        out, err_lines = [], []
        for line in answered:
            result, ok = await self._answer(line)
            (out if ok else err_lines).append(json.dumps(result))
        if out:
            batch["output_file_id"] = self._file(("\n".join(out) + "\n").encode(), f"{bid}_output.jsonl",
                                                 "batch_output")["id"]
        if err_lines:
            batch["error_file_id"] = self._file(("\n".join(err_lines) + "\n").encode(), f"{bid}_error.jsonl",
                                                "batch_output")["id"]
        batch["request_counts"].update(completed=len(out), failed=len(err_lines))
        if outcome == "expired":
            batch.update(status="expired", expired_at=now)
        else:
            batch.update(status="completed", completed_at=now)

    async def _answer(self, line: dict) -> tuple[dict, bool]:
        """One request line → (output/error line, whether it belongs in the output file)."""
        cid = line["custom_id"]
        self.server.stats.batch_lines += 1
        head = {"id": f"batch_req_{self._id('')}", "custom_id": cid}
        hook = self.behaviour.line_error
        line_error = hook(cid) if hook is not None else None
        if line_error is not None:
            return {**head, "response": None, "error": line_error}, False
        body = line.get("body") if isinstance(line.get("body"), dict) else {}
        try:
            reply = self.server.handler(body)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:
            reply = Reply(status=500, error=f"handler error: {type(exc).__name__}: {exc}")
        request_id = f"req_{self._id('')}"
        if reply.raw_body is not None and not (reply.reset or reply.truncate_body):
            try:  # a verbatim 200 body (an error envelope, say) lands in the output file as it is
                raw = json.loads(reply.raw_body)
            except ValueError:
                raw = None
            if isinstance(raw, dict):
                response = {"status_code": 200, "request_id": request_id, "body": raw}
                return {**head, "response": response, "error": None}, True
        if reply.reset or reply.truncate_body or reply.raw_body is not None:
            reply = Reply(status=500, error="The server had an error while processing your request.")
        if reply.status >= 400:
            err = reply.error if isinstance(reply.error, dict) else _error_body(reply.status, reply.error)
            response = {"status_code": reply.status, "request_id": request_id, "body": err}
            return {**head, "response": response, "error": None}, False
        completion = self.server._completion(body, reply)
        response = {"status_code": 200, "request_id": request_id, "body": completion}
        return {**head, "response": response, "error": None}, True


async def serve(
    handler: Handler,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    record: bool = False,
    model: str = "judgekit-test",
    owned_by: str = "judgekit",
    batch: BatchBehaviour | None = None,
) -> tuple[asyncio.Server, _Server]:
    """Start serving on the running loop; returns the asyncio server and the state (stats, requests).

    ``model`` / ``owned_by`` are what ``GET /v1/models`` lists (a simulated judge names itself there);
    ``batch`` sets how the Batch API routes behave (default: complete on the second poll).
    """
    state = _Server(handler, record=record, model=model, owned_by=owned_by, batch=batch)
    server = await asyncio.start_server(state.connection, host, port, backlog=1024)
    return server, state


def serve_until_interrupted(handler: Handler, host: str = "127.0.0.1", port: int = 0, *, banner: str = "",
                            **options: Any) -> None:
    """Serve in the foreground until Ctrl-C; prints ``{banner}listening on http://HOST:PORT/v1`` once bound
    (``options``: :func:`serve`'s)."""

    async def run() -> None:
        server, _ = await serve(handler, host, port, **options)
        bound = server.sockets[0].getsockname()[1]
        print(f"{banner}listening on http://{host}:{bound}/v1", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


class ServerThread:
    """Run the server on its own event loop in a daemon thread.

    ``with ServerThread(handler) as srv:`` — ``srv.base_url`` is ``http://127.0.0.1:PORT/v1``;
    ``srv.stats`` counts requests; ``srv.requests`` holds :class:`RecordedRequest` when
    ``record=True``.
    """

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0, **options: Any) -> None:
        """``options``: :func:`serve`'s keyword options (``record``, ``model``, ``owned_by``, ``batch``)."""
        self._handler = handler
        self.host = host
        self.port = port
        self._options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._state: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def stats(self) -> ServerStats:
        assert self._state is not None, "server not started"
        return self._state.stats

    @property
    def requests(self) -> list[RecordedRequest]:
        assert self._state is not None, "server not started"
        return self._state.requests

    @property
    def api_requests(self) -> list[RecordedRequest]:
        """Files and Batches requests, in order (recorded when ``record=True``)."""
        assert self._state is not None, "server not started"
        return self._state.api_requests

    def start(self) -> ServerThread:
        self._thread = threading.Thread(target=self._run, name="openai-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"server failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._server, self._state = loop.run_until_complete(
                serve(self._handler, self.host, self.port, **self._options)
            )
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # report to the starting thread
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            if self._state is not None:
                self._state.close_connections()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(self._server.wait_closed(), 1.0))
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _latency_handler(latency_s: float) -> Handler:
    async def handler(body: dict) -> Reply:
        reply = echo_reply(body)
        reply.delay_s = latency_s
        return reply

    return handler


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m judgekit.openai_server",
        description="Serve a fixed valid judge reply over an OpenAI-compatible API (for benchmarks).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on start)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before every reply")
    args = parser.parse_args(argv)

    serve_until_interrupted(_latency_handler(args.latency_ms / 1000.0), args.host, args.port)
    sys.exit(0)


if __name__ == "__main__":
    main()
