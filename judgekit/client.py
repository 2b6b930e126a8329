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
so later calls go straight to it. Only an error *about the format* — one naming ``response_format``,
``json_schema``, ``json_object`` or structured output — moves down a rung (a llama.cpp server reports
the rejection as a 500, so a 5xx naming the format counts too); any other 400 (an example too long for
the context, say) says nothing about the format and never moves the endpoint down the ladder.

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
``status="error"`` with a message. A 200 reply that is an error envelope (``{"error": …}``, or no
``choices``) is a failed call like a 5xx — retried, counted, and left pending for ``resume`` — not an ok
call with unscored verdicts. :class:`CircuitBreaker` lets a runner stop after N consecutive failed calls.

**Permanent per-example errors.** A 400/413/422 that says *this request* cannot be served — the prompt
exceeds the model's context, the input is too long, a content filter refused it — is returned with
``status="rejected"`` after one attempt: retrying cannot help, it says nothing about the endpoint's
health (the runner does not count it toward the breaker), and the runner records the example's
verdicts as unscored with the reason, so the run completes with those examples marked and counted.

**Untrusted numbers.** Token counts in ``usage`` are read only when they are non-negative integers
(``"n/a"`` and the like become unknown), and log-probabilities only when they are numbers.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import math
import os
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from judgekit import rawtext, redact
from judgekit.parse import TokenLogprob
from judgekit.pricing import MAX_TOKENS_PER_CALL

if TYPE_CHECKING:  # openai is imported when a client is made: pages and reports never load it
    import openai

__all__ = [
    "CallResult",
    "failed_result",
    "is_format_rejection",
    "is_permanent",
    "reply_failure",
    "scrub",
    "token_count",
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
PERMANENT_STATUS = frozenset({400, 413, 422})  # with a per-example reason, see _PER_EXAMPLE
_FORMAT_REJECTION = re.compile(
    r"response[_ ]?format|json[_ ]?schema|json[_ ]?object|structured[_ ]?output|"
    r"guided[_ ]?(?:json|decoding|grammar)|\bgrammar\b",
    re.IGNORECASE,
)
# what providers say when *this* prompt cannot be served (OpenAI, vLLM, llama.cpp, Anthropic- and
# Gemini-compatible gateways, Azure's content filter); a setting every call shares (max_tokens too large,
# an unknown model) is not in here: it fails every call, and the breaker should stop the run
_PER_EXAMPLE = re.compile(
    r"context[_ ]?length|context[_ ]?window|context[_ ]?size|maximum context|max_model_len|maximum model length|"
    r"too many (?:input |prompt )?tokens|prompt is too long|input is too long|"
    r"(?:prompt|input|request|message)s? (?:is |are )?(?:too long|too large|longer than)|"
    r"exceeds? (?:the )?(?:maximum|max|limit|available context)|string_above_max_length|exceed_context|"
    r"content[_ ]?filter|content[_ ]?policy|content management policy|safety system|invalid[_ ]?prompt|"
    r"flagged as",
    re.IGNORECASE,
)


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
    status: Literal["ok", "error", "rejected"]  # rejected = a permanent per-example refusal (not retried)
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
    backoff_s: float = 0.0  # the waits the client asked for between attempts (Retry-After, or backoff)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def rejected(self) -> bool:
        """A permanent per-example error: not retried, not counted by the breaker, not resumed."""
        return self.status == "rejected"


# ----------------------------------------------------------------------------------- the client


def _api_key(judge: JudgeConfig) -> str:
    if judge.api_key_env is None:
        return NO_KEY
    try:
        redact.check_env_name(judge.api_key_env)
    except ValueError as e:
        raise JudgeConfigError(str(e)) from None
    key = os.environ.get(judge.api_key_env)
    if not key:
        raise JudgeConfigError(
            f"environment variable {judge.api_key_env} (named as the API key of judge "
            f"{judge.display_name!r}) is not set"
        )
    return key


@functools.cache
def _default_tls(http: Any) -> Any:
    """The HTTP package's own default TLS context (its trust store and environment settings), built once:
    building one costs ~50 ms, and a run makes a client per few workers."""
    return http.create_ssl_context()


def _http_client() -> Any:
    """openai's default async HTTP client with a pool sized for high concurrency.

    ``Limits`` comes from whichever HTTP package this openai version is built on (httpx or httpx2).
    """
    import openai

    base = openai.DefaultAsyncHttpxClient
    client_cls = next((c for c in base.__mro__ if c.__name__ == "AsyncClient"), None)
    http = sys.modules.get(client_cls.__module__.split(".")[0]) if client_cls else None
    limits_cls = getattr(http, "Limits", None)
    if limits_cls is None:
        return None
    limits = limits_cls(max_connections=POOL_SIZE, max_keepalive_connections=POOL_SIZE)
    if not hasattr(http, "create_ssl_context"):
        return base(limits=limits)
    return base(limits=limits, verify=_default_tls(http))


def make_client(judge: JudgeConfig) -> openai.AsyncOpenAI:
    """Build the judge's client — the one place an ``AsyncOpenAI`` is made.

    Raises :class:`JudgeConfigError` if ``api_key_env`` names an unset variable. Retries are disabled
    in the openai client (``max_retries=0``); :func:`complete` does and counts them.
    """
    import openai

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


def response_format(mode: str, schema: dict | None) -> dict | None:
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


def scrub(text: str, key: str | None = None) -> str:
    """Error text without the client's key, any fragment of it, or anything else credential-shaped."""
    return redact.scrub(text, [key] if key and key != NO_KEY else []) or ""


def _error_detail(body: Any) -> str | None:
    """The human message inside an error body (``{"error": {"message", "code"}}``, ``{"detail": …}``…)."""
    if not isinstance(body, dict):
        return body if isinstance(body, str) else None
    err = body.get("error", body)
    message = None
    if isinstance(err, dict):
        message = err.get("message") or err.get("detail")
        code = err.get("code") or err.get("type")
        if isinstance(code, str) and code and (message is None or code not in str(message)):
            message = f"{message} ({code})" if message is not None else code
    elif isinstance(err, str):
        message = err
    if message is None and "detail" in body:
        message = body["detail"]
    return None if message is None else str(message)


def status_message(exc: openai.APIStatusError) -> str:
    message = _error_detail(exc.body)
    message = str(message if message is not None else exc.message)
    return f"HTTP {exc.status_code}: {message[:300]}"


def reply_failure(reply: Any) -> str | None:
    """Why a 200 chat-completion body is not a reply (an error envelope, no choices), else ``None``."""
    if not isinstance(reply, dict):
        return "the reply is not a JSON object"
    if reply.get("error"):
        detail = _error_detail(reply) or "no message"
        return f"HTTP 200 with an error body: {detail[:300]}"
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        detail = _error_detail(reply)  # e.g. vLLM's {"object": "error", "message": …}
        return "HTTP 200 without choices (not a chat completion)" + (f": {detail[:300]}" if detail else "")
    return None


def is_format_rejection(message: str) -> bool:
    """Whether an error is about the request's ``response_format`` (the only reason to step down)."""
    return bool(_FORMAT_REJECTION.search(message))


def is_permanent(status: int | None, message: str) -> bool:
    """A per-example refusal that no retry can fix: 413, or 400/422 saying the prompt is too long or was
    filtered (a 200 error envelope with such a message too). Other 4xx (a bad key, an unknown model) are
    the endpoint's configuration: they fail every call, so they stay ordinary failures for the breaker."""
    if status == 413:
        return True
    return (status in PERMANENT_STATUS or status == 200) and bool(_PER_EXAMPLE.search(message))


def connection_message(exc: BaseException) -> str:
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


def request_body(judge: JudgeConfig, messages: Sequence[Mapping[str, Any]], logprobs: bool, top: int) -> dict:
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
    return await client.post("/chat/completions", body=body, cast_to=dict, options={"timeout": kwargs.get("timeout")})


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _token(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _token_logprobs(choice: Any) -> list[TokenLogprob] | None:
    """The reply's token log-probabilities; a token or number of the wrong type reads as empty / NaN."""
    content = _get(_get(choice, "logprobs"), "content")
    if not isinstance(content, list) or not content:
        return None
    out = []
    for t in content:
        if not isinstance(t, dict):
            continue
        top = t.get("top_logprobs")
        alternatives = tuple(
            (_token(a.get("token")), _number(a.get("logprob"))) for a in (top if isinstance(top, list) else ())
            if isinstance(a, dict)
        )
        out.append(TokenLogprob(_token(t.get("token")), _number(t.get("logprob")), alternatives))
    return out


def token_count(value: Any) -> int | None:
    """A token count from a reply's ``usage``: a non-negative integer (``12``, ``12.0``, ``"12"``) a call
    can have, else unknown — a gateway's ``"n/a"`` or ``3e9`` must not reach an integer column (PostgreSQL
    refuses it and the write would take the other results of its batch with it; SQLite's SUM overflows)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 18:
        value = int(value.strip())
    return value if isinstance(value, int) and 0 <= value <= MAX_TOKENS_PER_CALL else None


def usage_counts(usage: Any) -> tuple[int | None, int | None, int | None]:
    """(prompt, completion, cached) tokens of a reply's ``usage``; cached tokens are part of the prompt, so
    more of them than prompt tokens (or any without a prompt count) are unknown, not a discount."""
    prompt = token_count(_get(usage, "prompt_tokens"))
    cached = token_count(_get(_get(usage, "prompt_tokens_details"), "cached_tokens"))
    if cached is not None and (prompt is None or cached > prompt):
        cached = None
    return prompt, token_count(_get(usage, "completion_tokens")), cached


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
    import openai

    endpoint = _endpoint(judge)
    if structured == "json_schema" and schema is None:
        structured = "json_object"
    if structured == "auto":
        ladder = MODES if schema is not None else MODES[1:]
        state = _modes.get(endpoint)
        rung = ladder.index(state.mode) if state and state.mode in ladder else 0
    else:
        ladder, rung, state = (structured,), 0, None
    base = request_body(judge, messages, logprobs, top_logprobs)
    key = getattr(client, "api_key", "") or ""
    if not isinstance(key, str):
        key = ""

    attempts = retries = 0
    started = time.perf_counter()
    latency = waited = 0.0
    while True:
        mode = ladder[rung]
        fmt = response_format(mode, schema)
        kwargs = {**base, "response_format": fmt} if fmt is not None else base
        attempts += 1
        t0 = time.perf_counter()
        headers: Mapping[str, str] | None = None
        status: int | None = None
        try:
            async with asyncio.timeout(judge.timeout_s):
                resp = await _post_chat(client, kwargs)
        except openai.APIStatusError as exc:
            latency = time.perf_counter() - t0
            status, message = exc.status_code, status_message(exc)
            headers = exc.response.headers if exc.response is not None else None
        except (openai.APITimeoutError, TimeoutError):
            latency = time.perf_counter() - t0
            message = f"timeout after {judge.timeout_s:g}s"
        except openai.APIConnectionError as exc:
            latency = time.perf_counter() - t0
            message = connection_message(exc)
        except Exception as exc:  # a malformed envelope etc. — the endpoint's fault, not ours
            latency = time.perf_counter() - t0
            status, message = -1, f"unexpected response ({type(exc).__name__}: {str(exc)[:200]})"
        else:
            latency = time.perf_counter() - t0
            failure = reply_failure(resp)
            if failure is None:
                if structured == "auto":
                    _note_mode(endpoint, mode, confirmed=True)
                return result_from_reply(resp, mode, attempts, retries, latency, time.perf_counter() - started,
                                         backoff=waited)
            status, message = 200, failure  # an error envelope: a failed call, never an ok one

        if structured == "auto" and rung + 1 < len(ladder) and status is not None and status >= 200 \
                and is_format_rejection(message):
            rung += 1
            _note_mode(endpoint, ladder[rung], confirmed=False)
            continue
        permanent = status is not None and is_permanent(status, message)
        retryable = not permanent and (
            status is None or status == 200 or status in RETRYABLE_STATUS or status >= 500
        )
        if retryable and retries < judge.max_retries:
            delay = _backoff_s(judge, retries, headers)
            waited += delay
            await asyncio.sleep(delay)
            retries += 1
            continue
        if attempts > 1:
            message = f"{message} (gave up after {attempts} attempts)"
        return failed_result(
            scrub(message, key), mode, attempts, retries, latency, time.perf_counter() - started,
            rejected=permanent, backoff=waited,
        )


def failed_result(
    error: str, mode: str, attempts: int, retries: int, latency: float = 0.0, total: float = 0.0, *,
    rejected: bool = False, backoff: float = 0.0,
) -> CallResult:
    """A call that produced no reply: ``error`` (resumable) or ``rejected`` (permanent for this example).
    The error text is made storable here (no NUL, no lone surrogate), as it travels on into run messages."""
    return CallResult(
        text=None,
        status="rejected" if rejected else "error",
        error=rawtext.storable(error),
        attempts=attempts,
        retries=retries,
        latency_s=latency,
        prompt_tokens=None,
        completion_tokens=None,
        cached_tokens=None,
        structured_mode=mode,
        logprobs=None,
        total_s=total,
        backoff_s=backoff,
    )


def result_from_reply(
    resp: dict, mode: str, attempts: int, retries: int, latency: float, total: float, *, backoff: float = 0.0
) -> CallResult:
    """The :class:`CallResult` of a successful chat-completion reply (a live call's, or a batch line's)."""
    choices = _get(resp, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    prompt_tokens, completion_tokens, cached_tokens = usage_counts(_get(resp, "usage"))
    text = _get(_get(choice, "message"), "content")
    return CallResult(
        text=text if isinstance(text, str) else None,
        status="ok",
        error=None,
        attempts=attempts,
        retries=retries,
        latency_s=latency,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
        structured_mode=mode,
        logprobs=_token_logprobs(choice),
        total_s=total,
        finish_reason=rawtext.clip(reason, 64) if isinstance(reason := _get(choice, "finish_reason"), str) else None,
        backoff_s=backoff,
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
