"""Defensive verdict parsing: judge reply text → one verdict per criterion.

Sits after :mod:`judgekit.client` in the flow (prompt → one call → *parse*). Everything here is pure.

The reply contract (see :mod:`judgekit.prompts`) is one JSON object keyed by criterion key, each entry
either ``{"verdict": v, "rationale": "…"}`` (either order) or a bare ``v``; ``v`` is ``true``/``false``
for binary criteria and an integer 1–5 for scale criteria. Real judges drift from that contract
(fences, prose around the JSON, ``"Yes"``, ``"4"``, ``4.6``, ``<think>`` blocks, truncation), so the
parser is lenient about spelling and strict about meaning: a reply it cannot read, or a criterion it
cannot find, becomes an **unscored** verdict (``value=None`` with a reason) — never a fail.

:func:`p_pass_from_logprobs` turns token log-probabilities into P(pass) for each verdict by reading
the alternatives the model weighed at the verdict value's first token.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from judgekit.rubric import Criterion

__all__ = [
    "ParsedVerdict",
    "TokenLogprob",
    "extract_json_object",
    "p_pass_from_logprobs",
    "parse_reply",
    "strip_thinking",
]

VERDICT_KEYS = ("verdict", "score", "value", "pass", "rating", "result")
RATIONALE_KEYS = ("rationale", "reasoning", "explanation", "reason")
RED_FLAG_KEYS = ("red_flags", "redflags", "flags")
TRUE_WORDS = frozenset({"true", "yes", "pass", "passed", "passes", "y", "1"})
FALSE_WORDS = frozenset({"false", "no", "fail", "failed", "fails", "n", "0"})
MAX_CANDIDATES = 64  # '{' positions tried per scan; bounds the work on adversarial text


@dataclass(frozen=True)
class ParsedVerdict:
    """One criterion's verdict as read from a reply. ``value is None`` means *unscored*."""

    value: int | None  # 1/0 binary, 1–5 scale; None = unscored
    rationale: str | None = None
    red_flags: tuple[str, ...] = ()
    error: str | None = None  # why unscored


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


# --------------------------------------------------------------------------------------- thinking

_THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<(?:think|thinking)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)


def strip_thinking(text: str) -> str:
    """Remove reasoning-model ``<think>…</think>`` blocks.

    An unclosed ``<think>`` (the model ran out of tokens while thinking) drops everything after it;
    a lone ``</think>`` (the chat template opened the block inside the prompt) drops everything
    before it.
    """
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


# ------------------------------------------------------------------------------------ JSON objects

_FENCE = re.compile(r"```[ \t]*(?:json5?|javascript|js)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PY_LITERALS = re.compile(r"\b(True|False|None)\b")
_PY_JSON = {"True": "true", "False": "false", "None": "null"}


_SPECIAL = re.compile(r'[{}"\\]')


def _object_end(text: str, start: int) -> int | None:
    """End of the balanced ``{…}`` opening at ``start`` (string literals and escapes honoured)."""
    depth = 0
    in_string = False
    escaped_at = -1
    for m in _SPECIAL.finditer(text, start):
        i = m.start()
        ch = text[i]
        if in_string:
            if i == escaped_at:
                continue
            if ch == "\\":
                escaped_at = i + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _scan_objects(text: str) -> Iterator[dict]:
    """Objects found by a balanced-brace scan from each ``{`` in turn (a failed start moves on)."""
    pos = text.find("{")
    starts = 0
    while pos >= 0 and starts < MAX_CANDIDATES:
        starts += 1
        end = _object_end(text, pos)
        obj = _loads_object(text[pos:end]) if end is not None else None
        if obj is not None:
            yield obj
            pos = text.find("{", end)
        else:
            pos = text.find("{", pos + 1)


def _outside_strings(text: str, pattern: re.Pattern[str], repl: Any) -> str:
    """Apply a substitution only to the parts of ``text`` that are not JSON string literals."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', text)
    return "".join(p if k % 2 else pattern.sub(repl, p) for k, p in enumerate(parts))


def _loads_object(candidate: str) -> dict | None:
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError):
        # Common small-model slips: trailing commas, Python literals.
        repaired = _outside_strings(candidate, _TRAILING_COMMA, r"\1")
        repaired = _outside_strings(repaired, _PY_LITERALS, lambda m: _PY_JSON[m.group(1)])
        if repaired == candidate:
            return None
        try:
            value = json.loads(repaired)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _json_objects(text: str) -> Iterator[dict]:
    """Every JSON object found in ``text``, most deliberate first: whole text, fenced, then scanned."""
    stripped = text.strip()
    if stripped.startswith("{"):
        obj = _loads_object(stripped)
        if obj is not None:
            yield obj
    for fence in _FENCE.finditer(text):
        obj = next(_scan_objects(fence.group(1)), None)
        if obj is not None:
            yield obj
    yield from _scan_objects(text)


def extract_json_object(text: str) -> dict | None:
    """The first complete JSON object in ``text`` (fenced or surrounded by prose), else ``None``."""
    return next(_json_objects(text), None)


# --------------------------------------------------------------------------------------- verdicts


def _norm_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip()).lower()


def _lookup(obj: dict, names: Sequence[str]) -> tuple[bool, Any]:
    folded = {_norm_key(str(k)): v for k, v in obj.items()}
    for name in names:
        if name in folded:
            return True, folded[name]
    return False, None


def _word(value: str) -> str:
    return value.strip().strip("\"'`.,;:!*()[] \t\n").lower()


def _coerce(value: Any, criterion: Criterion) -> tuple[int | None, str | None]:
    """A raw verdict value → (stored value, None) or (None, why unscored)."""
    if criterion.is_scale:
        if isinstance(value, bool):
            return None, f"boolean {value!r} is not a 1–5 score"
        number: float | None = None
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str):
            m = re.fullmatch(r"\s*([+-]?\d+(?:\.\d+)?)\s*(?:/\s*(?:5|five))?\s*", value)
            if m:
                number = float(m.group(1))
        if number is None or not math.isfinite(number):
            return None, f"unrecognised score {_short(value)}"
        return int(min(5, max(1, math.floor(number + 0.5)))), None
    if isinstance(value, bool):
        return int(value), None
    if isinstance(value, int | float) and value in (0, 1):
        return int(value), None
    if isinstance(value, str):
        word = _word(value)
        if word in TRUE_WORDS:
            return 1, None
        if word in FALSE_WORDS:
            return 0, None
    return None, f"unrecognised binary verdict {_short(value)}"


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _red_flags(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        return (raw,) if raw.strip() else ()
    if isinstance(raw, list | tuple):
        return tuple(str(x) for x in raw if isinstance(x, str | int | float) and str(x).strip())
    return ()


def _verdict_from_entry(entry: Any, criterion: Criterion) -> ParsedVerdict:
    if isinstance(entry, dict):
        _, rationale = _lookup(entry, RATIONALE_KEYS)
        rationale = None if rationale is None else str(rationale)
        _, flags = _lookup(entry, RED_FLAG_KEYS)
        found, raw = _lookup(entry, VERDICT_KEYS)
        if not found:
            return ParsedVerdict(None, rationale, _red_flags(flags), f"{criterion.key}: no verdict field")
        value, error = _coerce(raw, criterion)
        return ParsedVerdict(value, rationale, _red_flags(flags), None if value is not None else error)
    value, error = _coerce(entry, criterion)
    return ParsedVerdict(value, error=None if value is not None else f"{criterion.key}: {error}")


def _has_any_key(obj: dict, keys: set[str]) -> bool:
    return any(_norm_key(str(k)) in keys for k in obj)


def _choose_object(text: str, criteria: Sequence[Criterion]) -> dict | None:
    """The first object that speaks about the asked criteria; else the first object at all."""
    keys = {_norm_key(c.key) for c in criteria}
    first = None
    for obj in _json_objects(text):
        if first is None:
            first = obj
        if _has_any_key(obj, keys):
            return obj
        for inner in obj.values():  # a wrapper such as {"verdicts": {...}}
            if isinstance(inner, dict) and _has_any_key(inner, keys):
                return inner
        if len(criteria) == 1 and _has_any_key(obj, set(VERDICT_KEYS)):
            return obj
    return first


def _unscored(criteria: Sequence[Criterion], reason: str) -> dict[str, ParsedVerdict]:
    return {c.key: ParsedVerdict(None, error=reason) for c in criteria}


def parse_reply(text: str | None, criteria: Sequence[Criterion]) -> dict[str, ParsedVerdict]:
    """Read one verdict per asked criterion from a judge reply; never raises on reply content.

    Always returns an entry for every criterion. A reply without a usable JSON object, or a
    criterion missing from it, gives ``ParsedVerdict(value=None, error=…)`` — unscored, not failed.
    """
    if text is None:
        return _unscored(criteria, "no reply text")
    body = strip_thinking(text)
    if not body:
        return _unscored(
            criteria, "reply empty after removing <think> blocks" if text.strip() else "empty reply"
        )
    obj = _choose_object(body, criteria)
    if obj is None:
        return _unscored(criteria, "no JSON object found in reply")
    out: dict[str, ParsedVerdict] = {}
    for criterion in criteria:
        found, entry = _lookup(obj, (_norm_key(criterion.key),))
        if not found and len(criteria) == 1 and _has_any_key(obj, set(VERDICT_KEYS)):
            found, entry = True, obj  # bare {"verdict": …, "rationale": …} for a one-criterion call
        if not found:
            out[criterion.key] = ParsedVerdict(None, error=f"{criterion.key}: missing from reply")
        else:
            out[criterion.key] = _verdict_from_entry(entry, criterion)
    return out


# --------------------------------------------------------------------------------------- logprobs

_TRUE_SPELLINGS = ("true", "yes", "pass", "1")
_FALSE_SPELLINGS = ("false", "no", "fail", "0")


def _norm_token(token: str) -> str:
    return token.strip().strip("\"'`:,{}[] \t\n").lower()


def _binary_side(token: str) -> bool | None:
    """True/False if the (possibly partial) token spells the start of a pass/fail word."""
    word = _norm_token(token)
    if not word:
        return None
    if any(s.startswith(word) for s in _TRUE_SPELLINGS):
        return True
    if any(s.startswith(word) for s in _FALSE_SPELLINGS):
        return False
    return None


def _digit(token: str) -> int | None:
    word = _norm_token(token)
    return int(word[0]) if word[:1].isdigit() and (len(word) == 1 or not word[1].isdigit()) else None


def _value_start(joined: str, key: str, single: bool, search_from: int) -> int | None:
    k = re.escape(key)
    verdict = "|".join(VERDICT_KEYS)
    patterns = [
        rf'"{k}"\s*:\s*\{{[^{{}}]*?"(?:{verdict})"\s*:\s*',  # {"key": {... "verdict": <v>
        rf'"{k}"\s*:\s*(?=[^\s{{])',  # {"key": <v>
    ]
    if single:
        patterns.append(rf'"(?:{verdict})"\s*:\s*')  # bare {"verdict": <v>}
    for pattern in patterns:
        m = re.compile(pattern, re.IGNORECASE).search(joined, search_from)
        if m:
            return m.end()
    return None


def p_pass_from_logprobs(
    text: str, tokens: Sequence[TokenLogprob], criteria: Sequence[Criterion]
) -> dict[str, float]:
    """P(pass) per criterion from the alternatives at each verdict value's first token.

    Character offsets are rebuilt by concatenating the generated tokens (the tokens are what was
    generated; ``text`` is the same string when the server reports them faithfully). For each
    criterion the verdict value is located in the JSON text; the first non-punctuation token covering
    it is read and its ``top`` alternatives (or the chosen token alone) are normalised over the spellings
    of pass vs fail — binary: true/yes/pass/1 vs false/no/fail/0; scale: digits ≥ ``pass_at`` over all
    digit mass. A criterion that cannot be located, or whose token has no recognisable alternatives,
    is omitted.
    """
    if not tokens:
        return {}
    joined = "".join(t.token for t in tokens) or text
    starts: list[int] = []
    pos = 0
    for t in tokens:
        starts.append(pos)
        pos += len(t.token)
    closes = list(_THINK_CLOSE.finditer(joined))
    search_from = closes[-1].end() if closes else 0
    out: dict[str, float] = {}
    for criterion in criteria:
        at = _value_start(joined, criterion.key, len(criteria) == 1, search_from)
        if at is None or at >= pos:
            continue
        idx = _token_at(starts, at)
        while idx < len(tokens) and not _norm_token(tokens[idx].token):
            idx += 1  # skip a token that is only a quote or whitespace
        if idx >= len(tokens):
            continue
        p = _p_pass_at(tokens[idx], criterion)
        if p is not None:
            out[criterion.key] = p
    return out


def _token_at(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:  # last token starting at or before offset
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _p_pass_at(tok: TokenLogprob, criterion: Criterion) -> float | None:
    # Servers list the chosen token among its own top alternatives; fall back to it alone when the
    # request asked for no alternatives.
    alternatives = dict(tok.top) if tok.top else {tok.token: tok.logprob}
    passing = failing = 0.0
    for alt, logprob in alternatives.items():
        if logprob is None or not math.isfinite(logprob):
            continue
        mass = math.exp(min(logprob, 0.0))
        if criterion.is_scale:
            digit = _digit(alt)
            if digit is None:
                continue
            if criterion.passes(min(5, max(1, digit))):
                passing += mass
            else:
                failing += mass
        else:
            side = _binary_side(alt)
            if side is True:
                passing += mass
            elif side is False:
                failing += mass
    total = passing + failing
    return passing / total if total > 0 else None
