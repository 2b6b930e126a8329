"""Text from outside (judge replies, rationales, error messages) made storable and bounded — one place.

Where this sits: pure, below the parser and the store. The runner and the batch importer build every
call row's reply columns with :func:`reply_columns`, the parser bounds rationales with :func:`clip`,
and every free text goes through :func:`storable` on its way to a row, so the same input gives the
same row on SQLite and PostgreSQL:

* **NUL characters** (PostgreSQL's text type cannot hold them; SQLite can) and **lone surrogates**
  (not encodable as UTF-8; both drivers refuse them) become U+FFFD.
* **A raw reply is stored once, bounded**: its first and last :data:`RAW_EDGE` characters with a marker
  between them saying how much was left out, plus its full length and SHA-256 in their own columns —
  so a 10 MB reply costs 64 KB of the database, and the hash still identifies it.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["RAW_EDGE", "REPLACEMENT", "clip", "excerpt", "one_line", "reply_columns", "sha256", "storable"]

RAW_EDGE = 32 * 1024  # characters kept from each end of a long raw reply
REPLACEMENT = "\ufffd"


def storable(text: str | None) -> str | None:
    """``text`` with NUL characters and lone surrogates replaced by U+FFFD (same row on every store)."""
    if text is None:
        return None
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        # surrogatepass + replace turns each lone surrogate's 3 bytes into up to 3 replacement characters
        text = _squeeze(text)
    return text


def _squeeze(text: str) -> str:
    while REPLACEMENT * 2 in text:
        text = text.replace(REPLACEMENT * 2, REPLACEMENT)
    return text


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters; else its head and tail around a marker that says how
    many characters were left out (the stored text never exceeds ``limit`` + the marker)."""
    text = storable(text) or ""
    if len(text) <= limit:
        return text
    edge = limit // 2
    return f"{text[:edge]}\n…[{len(text) - 2 * edge} characters left out]…\n{text[-edge:]}"


def one_line(text: object) -> str:
    """Text on one line: every run of whitespace (newlines, tabs, Unicode line separators) → one space."""
    return " ".join(str(text or "").split())


def excerpt(text: object, n: int) -> str:
    """``text`` on one line, at most ``n`` characters — the last one an ellipsis where it was cut (the
    reports' and pages' short quotations of rationales, questions and answers)."""
    text = one_line(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def reply_columns(text: str | None) -> dict[str, Any]:
    """The call row's reply columns: ``response_text`` (bounded), ``response_chars``, ``response_sha256``."""
    if text is None:
        return {"response_text": None, "response_chars": None, "response_sha256": None}
    return {
        "response_text": clip(text, 2 * RAW_EDGE),
        "response_chars": len(text),
        "response_sha256": sha256(text),
    }
