"""Secrets out of every text judgekit writes: one scrubber, one check for key-variable names and base URLs.

Where this sits: below the client, the store and every exporter. Keys reach judgekit only through the
environment variable a judge *names* (``--api-key-env``); this module makes sure that nothing a key
touches — an endpoint's error message, a batch's error file, a run's message, an exported report, a
line on stderr — carries the key or a fragment of it.

:func:`scrub` removes, from any text:

1. the keys it is given and every key-like environment variable's value (names containing ``KEY``,
   ``TOKEN``, ``SECRET``, ``PASSWORD``, ``CREDENTIAL``…), including *fragments*: a word that shares
   :data:`FRAGMENT` or more consecutive characters with such a key, and a masked echo whose visible
   ends are the key's own (``canaryKE****8wT4`` — what providers print in a 401);
2. whatever looks like a credential regardless of the keys known: masked tokens (``abcd****wxyz``,
   ``abcd…wxyz``), ``sk-…`` style keys, ``Bearer …``, ``api_key=…`` / ``password: …`` values, and the
   user-info part of URLs (``https://user:pass@host``).

:func:`check_env_name` refuses a ``--api-key-env`` value that is not an environment-variable name,
*without echoing it* (a key pasted by mistake must not come back in the error), and
:func:`check_base_url` refuses a base URL that carries credentials.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = [
    "FRAGMENT",
    "MASK",
    "check_base_url",
    "check_env_name",
    "check_judge_settings",
    "looks_like_secret",
    "redact_url",
    "scrub",
]

MASK = "***"
FRAGMENT = 8  # consecutive characters shared with a key that make a word a fragment of it
MASKED_END = 4  # visible characters at either end of a masked echo that must match the key's own
MIN_KEY = 8  # shorter environment values are not treated as keys (they would match ordinary words)

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_WORD = re.compile(r"[^\s\"'`,;()\[\]{}<>|]+")
_MASK_RUN = re.compile(r"\*{2,}|…|\.{3,}|•{2,}")
# credentials recognisable without knowing the key
_PATTERNS = (
    # masked echoes: visible start, a run of mask characters, visible end
    re.compile(r"[A-Za-z0-9_\-]{2,}(?:\*{3,}|…|•{3,})[A-Za-z0-9_\-]{2,}"),
    re.compile(r"\b(?:sk|rk|pk|xai|gsk|sk_live|sk_test|ghp|gho|github_pat|hf|glpat)[-_][A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"\bAIza[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"(?i)\bBearer\s+\S+"),
    re.compile(r"(?i)\bBasic\s+[A-Za-z0-9+/=]{8,}"),
)
_LABELLED = re.compile(
    r"(?i)\b(api[-_ ]?key|access[-_ ]?token|token|secret|password|passwd|authorization)(\s*[=:]\s*)"
    r"(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@:]*(?::[^\s/@]*)?@")
_SECRET_PARAM = re.compile(r"(?i)key|token|secret|pass|pwd|sig|auth|credential|session")


def _environment_keys() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= MIN_KEY]


def _grams(key: str) -> set[str]:
    return {key[i : i + FRAGMENT] for i in range(len(key) - FRAGMENT + 1)}


def _is_fragment(word: str, key: str, grams: set[str]) -> bool:
    """``word`` shares FRAGMENT characters with ``key``, or is a masked echo showing the key's own ends."""
    if key in word:
        return True
    if len(word) >= FRAGMENT and any(word[i : i + FRAGMENT] in grams for i in range(len(word) - FRAGMENT + 1)):
        return True
    if not _MASK_RUN.search(word):
        return False
    parts = [p for p in _MASK_RUN.split(word) if p]
    if not parts:
        return False
    head, tail = re.split(r"[:=]", parts[0])[-1], parts[-1]
    return (len(head) >= MASKED_END and key.startswith(head)) or (len(tail) >= MASKED_END and key.endswith(tail))


def scrub(text: str | None, keys: Iterable[str] = ()) -> str | None:
    """``text`` with every key, key fragment and credential-looking token replaced by ``***``.

    ``keys`` are the secrets known to be in play (e.g. the client's key); key-like environment
    variables are always included. ``None`` stays ``None``.
    """
    if not text:
        return text
    known = [k for k in dict.fromkeys([*keys, *_environment_keys()]) if k and len(k) >= MIN_KEY]
    for key in known:
        text = text.replace(key, MASK)
    if known:
        grams = {k: _grams(k) for k in known}

        def word(m: re.Match) -> str:
            w = m.group(0)
            return MASK if any(_is_fragment(w, k, grams[k]) for k in known) else w

        text = _WORD.sub(word, text)
    text = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _LABELLED.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    return text


# ------------------------------------------------------------------------------- names and URLs


def looks_like_secret(value: str) -> bool:
    """Whether ``value`` reads like a key rather than a name: a known key prefix; a long mixed run of
    upper case, lower case and digits; or 16+ characters with no word separator and digits among them
    (hex keys such as Azure's, upper-case tokens). ``OPENAI_API_KEY`` and ``AZURE_KEY_2`` do not."""
    if any(p.search(value) for p in _PATTERNS):
        return True
    letters = value.replace("_", "").replace("-", "")
    digits = sum(c.isdigit() for c in letters)
    mixed = any(c.islower() for c in letters) and any(c.isupper() for c in letters) and digits > 0
    if len(letters) >= 20 and mixed:
        return True
    return "_" not in value and len(letters) >= 16 and digits >= 3


def check_env_name(name: str, option: str = "--api-key-env") -> str:
    """``name`` if it is an environment-variable name; else ValueError that does not repeat the value."""
    if not _ENV_NAME.match(name or "") or looks_like_secret(name):
        raise ValueError(
            f"{option} takes the NAME of an environment variable (like OPENAI_API_KEY), not a key; the value "
            "given is not a variable name (not shown, in case it is a key). Put the key in an environment "
            f"variable and pass its name with {option}."
        )
    return name


def check_base_url(url: str, option: str = "--base-url") -> str:
    """``url`` if it carries no credentials; else ValueError pointing to environment variables.

    Refused: user-info (``https://user:pass@host/v1``) and query parameters named like a key, token,
    secret, password or signature. The message names the host only.
    """
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        raise ValueError(f"{option}: not a URL") from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise ValueError(f"{option}: not an http(s) address with a host (like https://api.openai.com/v1)")
    secret_params = [k for k, _ in _query_pairs(parts.query) if _SECRET_PARAM.search(k)]
    where = ("user:password@ in the address" if "@" in parts.netloc
             else "a query parameter named like a key" if secret_params
             else "the part after #" if parts.fragment and looks_like_credentials(parts.fragment)
             else None)
    if where:
        raise ValueError(
            f"{option} for host {host} carries credentials ({where}); judgekit never stores "
            "keys. Remove them from the URL, put the key in an environment variable and name it with "
            "--api-key-env."
        )
    return url


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """A URL query's name/value pairs, split on ``&`` and on ``;`` (both separate parameters somewhere)."""
    return [pair for part in re.split(r"[&;]", query) if part for pair in parse_qsl(part, keep_blank_values=True)]


def looks_like_credentials(text: str) -> bool:
    """Whether a piece of a URL (a fragment) carries a credential: a parameter named like one, or a
    secret-looking token."""
    return any(_SECRET_PARAM.search(k) for k, _ in _query_pairs(text)) or any(
        looks_like_secret(w) for w in re.split(r"[&;=/:,]", text) if w
    )


def redact_url(url: str | None) -> str | None:
    """``url`` for display: user-info and secret-looking query values replaced by ``***``."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrub(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{k}={MASK if _SECRET_PARAM.search(k) else v}" for k, v in _query_pairs(parts.query))
    fragment = MASK if parts.fragment and looks_like_credentials(parts.fragment) else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def check_judge_settings(base_url: str | None, api_key_env: str | None) -> None:
    """Refuse a judge whose settings would put a secret in the store: credentials in its base URL, or a key
    pasted as the *name* of its key variable (neither is echoed)."""
    if base_url:
        check_base_url(base_url)
    if api_key_env:
        check_env_name(api_key_env)
