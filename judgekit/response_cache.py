"""The response cache: replies to temperature-0 judge requests, kept across runs.

Where it sits: the runner (:mod:`judgekit.runner`) asks :func:`request_key` for the key of every call it
is about to send and, when the run may read the cache, :class:`Lookup` for a stored reply; a hit becomes
a :class:`judgekit.client.CallResult` through :func:`result_from_entry` — no request is sent and nothing
is billed. A fresh reply that is worth keeping (:func:`entry_for`) goes to the runner's single writer,
which stores it in the same transaction as the call row and its verdicts, so a crash can never leave a
cached reply without its call or the other way round, and ``resume`` accounting is unchanged.

The key is content-addressed: sha256 over the endpoint (base URL), the model and the request body —
messages, sampling parameters, ``max_tokens``, the structured-output setting with its JSON schema and
the log-probability request. Two runs asking byte-identical questions of the same endpoint share
replies; change any of these and the key changes.

What is cached, and when:

* only replies to requests at temperature 0 (a sample at temperature > 0 is not *the* reply);
* only replies from which every asked criterion was read (scored, or an explicit "cannot assess"),
  and that were not cut off by ``max_tokens`` — a garbled or truncated reply is asked again next time;
* a run reads the cache unless it was started with ``--no-cache`` or belongs to a repeat group
  (``--repeat N``): repeats exist to ask again, so they never read it (they may still fill it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from judgekit import store
from judgekit.client import CallResult, JudgeConfig, result_from_reply

__all__ = ["Lookup", "entry_for", "may_read", "may_write", "request_key", "result_from_entry", "saved_usage"]


def may_write(judge: JudgeConfig) -> bool:
    """Whether replies of this judge configuration may be cached (temperature 0 only)."""
    return float(judge.temperature or 0.0) == 0.0


def may_read(judge: JudgeConfig, *, use_cache: bool, repeat_group: str | None) -> bool:
    """Whether a run may be served from the cache: temperature 0, not ``--no-cache``, not a repeat."""
    return may_write(judge) and use_cache and repeat_group is None


def request_key(
    judge: JudgeConfig,
    messages: Sequence[Mapping[str, Any]],
    *,
    schema: dict | None,
    structured: str,
    logprobs: bool,
) -> str:
    """sha256 (hex) of endpoint, model and request body: what makes two requests the same request."""
    body = {
        "base_url": judge.base_url.rstrip("/"),
        "model": judge.model,
        "messages": list(messages),
        "temperature": float(judge.temperature or 0.0),
        "top_p": judge.top_p,
        "seed": judge.seed,
        "max_tokens": judge.max_tokens,
        "suppress_thinking": judge.suppress_thinking,
        "structured": structured,
        "schema": schema,
        "logprobs": bool(logprobs),
    }
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def entry_for(key: str, judge: JudgeConfig, result: CallResult, *, complete: bool) -> dict | None:
    """The cache row for a fresh reply, or ``None`` when it must not be kept (see the module docstring).

    ``complete``: every asked criterion was read from the reply (scored or "cannot assess").
    """
    if not (result.ok and complete and result.text is not None and result.finish_reason != "length"):
        return None
    choice: dict[str, Any] = {"message": {"content": result.text}, "finish_reason": result.finish_reason}
    if result.logprobs:
        choice["logprobs"] = {"content": [
            {"token": t.token, "logprob": t.logprob, "top_logprobs": [{"token": a, "logprob": lp} for a, lp in t.top]}
            for t in result.logprobs
        ]}
    reply = {
        "choices": [choice],
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
        },
        "structured_mode": result.structured_mode,
    }
    return {"key": key, "base_url": judge.base_url.rstrip("/"), "model": judge.model, "reply": reply,
            "created_at": store.utcnow()}


def result_from_entry(reply: dict) -> CallResult:
    """A cache hit as a call result: no request sent (0 attempts), no latency, no billed tokens.

    The tokens the reply cost when it was first made are in :func:`saved_usage`.
    """
    result = result_from_reply(reply, str(reply.get("structured_mode") or "cache"), 0, 0, 0.0, 0.0)
    result.prompt_tokens = result.completion_tokens = result.cached_tokens = None
    result.latency_s = None  # type: ignore[assignment]  # a hit has no latency; percentiles skip it
    return result


def saved_usage(reply: dict) -> dict[str, int]:
    """Prompt and completion tokens a cached reply cost when it was made (what a hit saves)."""
    usage = reply.get("usage") or {}
    return {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0)}


class Lookup:
    """Reads cached replies for one run through one connection of its own (the runner's event loop).

    Opened only when the cache holds anything for the run's endpoint and model, so a run against a cold
    cache costs no lookups at all.
    """

    def __init__(self, engine: Engine, judge: JudgeConfig) -> None:
        self._conn: Connection | None = None
        table = store.ResponseCache
        with engine.connect() as conn:
            warm = conn.execute(select(table.key).where(
                table.base_url == judge.base_url.rstrip("/"), table.model == judge.model).limit(1)).first()
        if warm is not None:
            self._conn = engine.connect()

    @property
    def active(self) -> bool:
        return self._conn is not None

    def get(self, key: str) -> dict | None:
        if self._conn is None:
            return None
        reply = self._conn.execute(
            select(store.ResponseCache.reply).where(store.ResponseCache.key == key)).scalar_one_or_none()
        self._conn.rollback()  # end the read transaction: never hold a snapshot (or a SQLite read lock)
        return reply

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
