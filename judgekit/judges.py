"""A judge: what the user names (:class:`JudgeSpec`: endpoint, model, the *name* of the key variable), the
checks that keep secrets out of the store, the judge's row in the store, and the client settings for it.

Where this sits: above :mod:`judgekit.store` and :mod:`judgekit.client` (the one HTTP seam), below
everything that creates runs — :mod:`judgekit.runner`, :mod:`judgekit.critique`, :mod:`judgekit.bundles` —
so none of those needs another of them to name or store a judge.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy.orm import Session

from judgekit import client as client_mod
from judgekit import redact, store

__all__ = ["JudgeKind", "JudgeSpec", "check_judge", "detect_judge_kind", "judge_config", "store_judge"]

JudgeKind = str  # openai | simulated | local


@dataclass(frozen=True)
class JudgeSpec:
    """A judge as the user names it: endpoint, model, and the *name* of the key variable."""

    base_url: str
    model: str
    kind: JudgeKind = "openai"
    api_key_env: str | None = None
    name: str | None = None
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_tokens: int = 1024
    suppress_thinking: bool = False
    max_retries: int = 4


def detect_judge_kind(base_url: str, timeout_s: float = 2.0) -> JudgeKind:
    """``simulated`` when the endpoint's model list says so (judgekit's sim judge), else ``openai``.

    One GET with the standard library: an HTTP package imported for it alone would cost every run's
    start-up a quarter of a second."""
    import json
    import urllib.request

    if not base_url.lower().startswith(("http://", "https://")):  # urllib would also open file:// and ftp://
        return "openai"
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout_s) as resp:  # noqa: S310
            owners = {str(m.get("owned_by", "")) for m in json.loads(resp.read(1 << 20)).get("data", [])}
    except Exception:
        return "openai"
    return "simulated" if any("simulated" in o for o in owners) else "openai"


def check_judge(judge: JudgeSpec) -> None:
    """Refuse a judge whose settings would put a secret in the store: credentials in the base URL, a key
    pasted as the *name* of its variable (neither is echoed), or a named variable that is not set."""
    redact.check_judge_settings(judge.base_url, judge.api_key_env)
    if judge.api_key_env and not os.environ.get(judge.api_key_env):
        raise ValueError(f"--api-key-env {judge.api_key_env}: that environment variable is not set")


def store_judge(s: Session, judge: JudgeSpec) -> store.Judge:
    """The judge row of a spec (an identical existing row is reused)."""
    return store.get_or_create_judge(
        s,
        kind=judge.kind,
        name=judge.name or judge.model,
        base_url=judge.base_url,
        model=judge.model,
        api_key_env=judge.api_key_env,
        params={"temperature": judge.temperature, "max_retries": judge.max_retries},
        timeout_s=judge.timeout_s,
        max_tokens=judge.max_tokens,
        suppress_thinking=judge.suppress_thinking,
    )


def judge_config(judge: store.Judge) -> client_mod.JudgeConfig:
    params = judge.params or {}
    return client_mod.JudgeConfig(
        base_url=judge.base_url or "",
        model=judge.model or "",
        api_key_env=judge.api_key_env,
        temperature=params.get("temperature", 0.0),
        timeout_s=judge.timeout_s or 60.0,
        max_tokens=judge.max_tokens or 1024,
        suppress_thinking=bool(judge.suppress_thinking),
        max_retries=params.get("max_retries", 4),
        name=judge.name,
    )
