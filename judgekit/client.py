"""The one OpenAI-compatible client seam: structured-output modes, retries, timeouts, logprobs.

Flow: prompt builder → :func:`complete` (one logical call, possibly several HTTP attempts) →
:func:`judgekit.parse.parse_reply`. :func:`make_client` is the only place an ``openai.AsyncOpenAI``
is built; everything else receives it, so tests swap the endpoint (a real local server), not code.

**API key.** :class:`JudgeConfig` holds the *name* of an environment variable; the key is read when
the client is built and never stored, logged or put into an error message (error text is scrubbed).

**Structured output.** ``structured="auto"`` walks a ladder until the endpoint accepts a request:
``json_schema`` (OpenAI, vLLM) → ``{"type": "json_object", "schema": …}`` (llama-cpp-python's
server) → prompt-only JSON (no ``response_format``; the prompt asks for JSON and the parser is
lenient). What worked is remembered per endpoint ``(base_url, model)`` for the life of the process,
so later calls go straight to it. While probing, any 400/422 moves down a rung; once a mode has
worked, only an error that names ``response_format``/``json_schema``/"not supported" does (a
llama.cpp server reports the rejection as a 500, so a 5xx naming the format counts too).

**Runaway guards.** A per-attempt timeout (``timeout_s``), ``max_tokens``, and optionally
``suppress_thinking``: sends ``extra_body={"chat_template_kwargs": {"enable_thinking": false}}``
(honoured by vLLM/SGLang/llama.cpp Jinja templates for Qwen3-style models) and appends a
``/no_think`` marker to the system message (Qwen3's soft switch). Only use it against local servers:
OpenAI's own API rejects the unknown ``chat_template_kwargs`` field. ``<think>`` blocks that still
appear are stripped by the parser, not here — the raw reply is kept as received.

**Retries** are ours (the openai client is built with ``max_retries=0``) so they are counted: 408,
409, 429, 5xx, connection errors and timeouts are retried up to ``max_retries`` times with
exponential backoff and jitter, honouring ``retry-after-ms`` / ``Retry-After`` (capped at
``max_retry_after_s``). :func:`complete` never raises for endpoint faults; it returns
``status="error"`` with a message. :class:`CircuitBreaker` lets a runner stop after N consecutive
failed calls.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import openai

from judgekit.parse import TokenLogprob

__all__ = [
    "CallResult",
    "CircuitBreaker",
    "JudgeConfig",
    "JudgeConfigError",
    "Structured",
    "complete",
    "forget_structured_modes",
    "known_structured_mode",
    "make_client",
]

Structured = Literal["auto", "json_schema", "json_object", "prompt"]
MODES: tuple[str, ...] = ("json_schema", "json_object", "prompt")
POOL_SIZE = 256  # HTTP connections per client; the runner fans out far below this
NO_KEY = "sk-no-key"
NO_THINK_MARKER = "/no_think"
RETRYABLE_STATUS = frozenset({408, 409, 429})
_FORMAT_REJECTION = re.compile(
    r"response_format|json_schema|json_object|not supported|unsupported|must be one of", re.IGNORECASE
)
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*.]{3,}|Bearer\s+\S+)")


class JudgeConfigError(ValueError):
    """The judge configuration cannot be used (e.g. the named key variable is not set)."""


@dataclass(frozen=True)
class JudgeConfig:
    """Where and how to call a judge. Holds the *name* of the key variable, never the key."""

    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    timeout_s: float = 60.0
    max_tokens: int = 1024
    suppress_thinking: bool = False
    max_retries: int = 4
    name: str | None = None  # display name
    backoff_base: float = 0.5  # first retry waits ~backoff_base s, doubling, with jitter
    backoff_cap: float = 8.0
    max_retry_after_s: float = 60.0  # a server's Retry-After is honoured up to this

    @property
    def display_name(self) -> str:
        return self.name or self.model


@dataclass
class CallResult:
    """One logical judge call. ``status="error"`` carries a message free of credentials."""

    text: str | None
    status: Literal["ok", "error"]
    error: str | None
    attempts: int  # HTTP requests sent, including format probes and retries
    retries: int  # retries after transient faults (429, 5xx, resets, timeouts)
    latency_s: float  # the successful attempt (or the last attempt on error)
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    structured_mode: str
    logprobs: list[TokenLogprob] | None
    total_s: float = 0.0  # wall time including retries and backoff
    finish_reason: str | None = None  # "length" = cut off by max_tokens

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ----------------------------------------------------------------------------------- the client


def _api_key(judge: JudgeConfig) -> str:
    if judge.api_key_env is None:
        return NO_KEY
    key = os.environ.get(judge.api_key_env)
    if not key:
        raise JudgeConfigError(
            f"environment variable {judge.api_key_env} (named as the API key of judge "
            f"{judge.display_name!r}) is not set"
        )
    return key


def _http_client() -> Any:
    """openai's default async HTTP client with a pool sized for high concurrency.

    ``Limits`` comes from whichever HTTP package this openai version is built on (httpx or httpx2).
    """
    base = openai.DefaultAsyncHttpxClient
    client_cls = next((c for c in base.__mro__ if c.__name__ == "AsyncClient"), None)
    http = sys.modules.get(client_cls.__module__.split(".")[0]) if client_cls else None
    limits_cls = getattr(http, "Limits", None)
    if limits_cls is None:
        return None
    return base(limits=limits_cls(max_connections=POOL_SIZE, max_keepalive_connections=POOL_SIZE))


def make_client(judge: JudgeConfig) -> openai.AsyncOpenAI:
    """Build the judge's client — the one place an ``AsyncOpenAI`` is made.

    Raises :class:`JudgeConfigError` if ``api_key_env`` names an unset variable. Retries are disabled
    in the openai client (``max_retries=0``); :func:`complete` does and counts them.
    """
    return openai.AsyncOpenAI(
        api_key=_api_key(judge),
        base_url=judge.base_url,
        max_retries=0,
        timeout=judge.timeout_s,
        http_client=_http_client(),
    )


# ---------------------------------------------------------------------------- structured modes


@dataclass
class _ModeState:
    mode: str
    confirmed: bool  # a request in this mode has succeeded


_modes: dict[tuple[str, str], _ModeState] = {}


def _endpoint(judge: JudgeConfig) -> tuple[str, str]:
    return judge.base_url.rstrip("/"), judge.model


def known_structured_mode(judge: JudgeConfig) -> str | None:
    """The structured-output mode ``auto`` has found working for this endpoint, if any."""
    state = _modes.get(_endpoint(judge))
    return state.mode if state and state.confirmed else None


def forget_structured_modes() -> None:
    """Forget what ``auto`` learned about every endpoint (e.g. after a server was swapped)."""
    _modes.clear()


def _note_mode(endpoint: tuple[str, str], mode: str, confirmed: bool) -> None:
    state = _modes.get(endpoint)
    if confirmed:
        _modes[endpoint] = _ModeState(mode, True)
    elif state is None or (not state.confirmed and MODES.index(state.mode) < MODES.index(mode)):
        _modes[endpoint] = _ModeState(mode, False)


def _response_format(mode: str, schema: dict | None) -> dict | None:
    if mode == "prompt":
        return None
    if mode == "json_schema" and schema is not None:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "judge_verdicts"))[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if schema is not None:
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


# ------------------------------------------------------------------------------------- retries


def _retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            parsed = email.utils.parsedate_tz(value) if name == "retry-after" else None
            if parsed is None:
                continue
            seconds = email.utils.mktime_tz(parsed) - time.time()
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _backoff_s(judge: JudgeConfig, retry: int, headers: Mapping[str, str] | None) -> float:
    server = _retry_after_s(headers)
    if server is not None:
        # A little jitter *above* the server's figure keeps a burst of callers from returning together.
        return min(server * (1.0 + 0.1 * random.random()), judge.max_retry_after_s)
    delay = min(judge.backoff_cap, judge.backoff_base * (2.0**retry))
    return delay * (0.5 + 0.5 * random.random())


def _scrub(text: str, key: str) -> str:
    if key and key != NO_KEY:
        text = text.replace(key, "***")
    return _KEYLIKE.sub("***", text)


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = None
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = err.get("message") or err.get("detail")
        elif isinstance(err, str):
            message = err
        if message is None and "detail" in body:
            message = str(body["detail"])
    message = str(message if message is not None else exc.message)
    return f"HTTP {exc.status_code}: {message[:300]}"


def _connection_message(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
    return f"connection error ({detail[:200]})"


# ------------------------------------------------------------------------------------ complete


def _messages(judge: JudgeConfig, messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    out = [dict(m) for m in messages]
    if judge.suppress_thinking:
        for m in out:
            if m.get("role") == "system" and isinstance(m.get("content"), str):
                if NO_THINK_MARKER not in m["content"]:
                    m["content"] = f"{m['content'].rstrip()}\n{NO_THINK_MARKER}"
                break
        else:
            out.insert(0, {"role": "system", "content": NO_THINK_MARKER})
    return out


def _request(judge: JudgeConfig, messages: Sequence[Mapping[str, Any]], logprobs: bool, top: int) -> dict:
    kwargs: dict[str, Any] = {
        "model": judge.model,
        "messages": _messages(judge, messages),
        "temperature": judge.temperature,
        "max_tokens": judge.max_tokens,
        "timeout": judge.timeout_s,
    }
    if judge.top_p is not None:
        kwargs["top_p"] = judge.top_p
    if judge.seed is not None:
        kwargs["seed"] = judge.seed
    if logprobs:
        kwargs["logprobs"] = True
        kwargs["top_logprobs"] = top
    if judge.suppress_thinking:
        kwargs["extra_body"] = {"chat_template_kwargs": {"enable_thinking": False}}
    return kwargs


async def _post_chat(client: openai.AsyncOpenAI, kwargs: dict) -> dict:
    """POST /chat/completions through the openai client's own transport, auth and error mapping.

    The same request as ``client.chat.completions.create``, minus two costs that dominated the runner's
    per-call CPU at concurrency 32 (profiled): the recursive TypedDict transform of the messages (already
    plain JSON here, ~1.4 ms) and building a ``ChatCompletion`` model from the reply (~0.4 ms) — the
    reply is read as the JSON object it is.
    """
    body = {k: v for k, v in kwargs.items() if k not in ("timeout", "extra_body")}
    body.update(kwargs.get("extra_body") or {})
    reply = await client.post("/chat/completions", body=body, cast_to=dict, options={"timeout": kwargs.get("timeout")})
    if not isinstance(reply, dict):
        raise ValueError("the reply is not a JSON object")
    return reply


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _token_logprobs(choice: Any) -> list[TokenLogprob] | None:
    content = _get(_get(choice, "logprobs"), "content")
    if not isinstance(content, list) or not content:
        return None
    return [
        TokenLogprob(t.get("token", ""), t.get("logprob", 0.0),
                     tuple((a.get("token", ""), a.get("logprob", 0.0)) for a in (t.get("top_logprobs") or ())))
        for t in content if isinstance(t, dict)
    ]


async def complete(
    client: openai.AsyncOpenAI,
    judge: JudgeConfig,
    messages: Sequence[Mapping[str, Any]],
    *,
    schema: dict | None = None,
    structured: Structured = "auto",
    logprobs: bool = False,
    top_logprobs: int = 5,
) -> CallResult:
    """Send one judge call and return its reply text and accounting; never raises for endpoint faults.

    ``schema`` is the JSON schema of the expected reply object (``None``: plain ``json_object``).
    ``structured`` picks the response_format mode or ``"auto"`` (see the module docstring); an explicit
    ``"json_schema"`` without a schema degrades to ``json_object``. With ``logprobs`` the reply's
    token log-probabilities (``top_logprobs`` alternatives each) are returned for
    :func:`judgekit.parse.p_pass_from_logprobs`.
    """
    endpoint = _endpoint(judge)
    if structured == "json_schema" and schema is None:
        structured = "json_object"
    if structured == "auto":
        ladder = MODES if schema is not None else MODES[1:]
        state = _modes.get(endpoint)
        rung = ladder.index(state.mode) if state and state.mode in ladder else 0
    else:
        ladder, rung, state = (structured,), 0, None
    base = _request(judge, messages, logprobs, top_logprobs)
    key = getattr(client, "api_key", "") or ""
    if not isinstance(key, str):
        key = ""

    attempts = retries = 0
    started = time.perf_counter()
    latency = 0.0
    while True:
        mode = ladder[rung]
        fmt = _response_format(mode, schema)
        kwargs = {**base, "response_format": fmt} if fmt is not None else base
        attempts += 1
        t0 = time.perf_counter()
        headers: Mapping[str, str] | None = None
        try:
            async with asyncio.timeout(judge.timeout_s):
                resp = await _post_chat(client, kwargs)
        except openai.APIStatusError as exc:
            latency = time.perf_counter() - t0
            status = exc.status_code
            message = _status_message(exc)
            probing = structured == "auto" and not (state and state.confirmed and state.mode == mode)
            if (
                structured == "auto"
                and rung + 1 < len(ladder)
                and (
                    (probing and status in (400, 422))
                    or (status >= 400 and _FORMAT_REJECTION.search(message))
                )
            ):
                rung += 1
                _note_mode(endpoint, ladder[rung], confirmed=False)
                continue
            retryable = status in RETRYABLE_STATUS or status >= 500
            headers = exc.response.headers if exc.response is not None else None
        except (openai.APITimeoutError, TimeoutError):
            latency = time.perf_counter() - t0
            message, retryable = f"timeout after {judge.timeout_s:g}s", True
        except openai.APIConnectionError as exc:
            latency = time.perf_counter() - t0
            message, retryable = _connection_message(exc), True
        except Exception as exc:  # a malformed envelope etc. — the endpoint's fault, not ours
            latency = time.perf_counter() - t0
            message, retryable = f"unexpected response ({type(exc).__name__}: {str(exc)[:200]})", False
        else:
            latency = time.perf_counter() - t0
            if structured == "auto":
                _note_mode(endpoint, mode, confirmed=True)
            return result_from_reply(resp, mode, attempts, retries, latency, time.perf_counter() - started)

        if retryable and retries < judge.max_retries:
            await asyncio.sleep(_backoff_s(judge, retries, headers))
            retries += 1
            continue
        if attempts > 1:
            message = f"{message} (gave up after {attempts} attempts)"
        return CallResult(
            text=None,
            status="error",
            error=_scrub(message, key),
            attempts=attempts,
            retries=retries,
            latency_s=latency,
            prompt_tokens=None,
            completion_tokens=None,
            cached_tokens=None,
            structured_mode=mode,
            logprobs=None,
            total_s=time.perf_counter() - started,
        )


def result_from_reply(resp: dict, mode: str, attempts: int, retries: int, latency: float, total: float) -> CallResult:
    """The :class:`CallResult` of a successful chat-completion reply (a live call's, or a batch line's)."""
    choices = _get(resp, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    usage = _get(resp, "usage")
    text = _get(_get(choice, "message"), "content")
    return CallResult(
        text=text if isinstance(text, str) else None,
        status="ok",
        error=None,
        attempts=attempts,
        retries=retries,
        latency_s=latency,
        prompt_tokens=_get(usage, "prompt_tokens"),
        completion_tokens=_get(usage, "completion_tokens"),
        cached_tokens=_get(_get(usage, "prompt_tokens_details"), "cached_tokens"),
        structured_mode=mode,
        logprobs=_token_logprobs(choice),
        total_s=total,
        finish_reason=_get(choice, "finish_reason"),
    )


# ----------------------------------------------------------------------------- circuit breaker


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failed calls; a runner checks ``.open`` to end the run.

    ``threshold <= 0`` disables it. Once open it stays open until :meth:`reset`.
    """

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self._open = False

    def record(self, ok: bool, error: str | None = None) -> bool:
        """Record one call's outcome; returns whether the breaker is now open."""
        if ok:
            self.consecutive_failures = 0
        else:
            self.consecutive_failures += 1
            if error:
                self.last_error = error
            if 0 < self.threshold <= self.consecutive_failures:
                self._open = True
        return self._open

    @property
    def open(self) -> bool:
        return self._open

    @property
    def message(self) -> str | None:
        if not self._open:
            return None
        last = f"; last error: {self.last_error}" if self.last_error else ""
        return f"stopped after {self.threshold} consecutive failed calls{last}"

    def reset(self) -> None:
        self.consecutive_failures = 0
        self.last_error = None
        self._open = False
