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
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from judgekit import rawtext
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
CANNOT_ASSESS_WORDS = frozenset({"cannot_assess", "can't_assess", "cant_assess", "cannot_be_assessed"})
TRUE_WORDS = frozenset({"true", "yes", "pass", "passed", "passes", "y", "1"})
FALSE_WORDS = frozenset({"false", "no", "fail", "failed", "fails", "n", "0"})
MAX_CANDIDATES = 64  # '{' positions tried per scan; bounds the work on adversarial text
MAX_PARSE_CHARS = 1_000_000  # a longer reply is unscored unread (max_tokens keeps real replies far below)
SCAN_BUDGET = 200_000  # special characters ({ } " \\) the brace scan visits per reply, over all candidates
MAX_DEPTH = 64  # a candidate nested deeper is no verdict object (a reply nests 2–3 levels): the scan moves on
MAX_RATIONALE_CHARS = 16_384  # a rationale is stored up to this (head and tail kept, the middle marked)
MAX_FLAG_CHARS = 500
MAX_FLAGS = 32


@dataclass(frozen=True)
class ParsedVerdict:
    """One criterion's verdict as read from a reply. ``value is None`` means *unscored* — unless
    ``cannot_assess``: the judge explicitly said the criterion cannot be assessed (offered only where the
    rubric enables it), its own outcome, neither a fail nor a parse failure."""

    value: int | None  # 1/0 binary, 1–5 scale; None = unscored (or cannot assess)
    rationale: str | None = None
    red_flags: tuple[str, ...] = ()
    error: str | None = None  # why unscored
    cannot_assess: bool = False


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


# --------------------------------------------------------------------------------------- thinking

_THINK_TAG = re.compile(r"<(/?)(think|thinking)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)>", re.IGNORECASE)


def strip_thinking(text: str) -> str:
    """Remove reasoning-model ``<think>…</think>`` blocks, in one pass over the tags (linear time).

    An unclosed ``<think>`` (the model ran out of tokens while thinking) drops everything after it;
    a lone ``</think>`` (the chat template opened the block inside the prompt) drops everything
    before it.
    """
    kept: list[str] = []
    pos = 0
    open_name: str | None = None
    for m in _THINK_TAG.finditer(text):
        closing, name = bool(m.group(1)), m.group(2).lower()
        if open_name is None and not closing:
            kept.append(text[pos : m.start()])
            open_name = name
        elif open_name is not None and closing and name == open_name:
            pos, open_name = m.end(), None
        elif open_name is None and closing:  # a lone close: what came before was the model's thinking
            kept, pos = [], m.end()
    if open_name is None:
        kept.append(text[pos:])
    return "".join(kept).strip()


# ------------------------------------------------------------------------------------ JSON objects

_FENCE = re.compile(r"```[ \t]*(?:json5?|javascript|js)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PY_LITERALS = re.compile(r"\b(True|False|None)\b")
_PY_JSON = {"True": "true", "False": "false", "None": "null"}


_SPECIAL = re.compile(r'[{}"\\]')


class _Budget:
    """Characters the brace scan may still look at, shared by every candidate of one reply: together with
    :data:`MAX_PARSE_CHARS` it bounds the work any reply can cause (adversarial text full of ``{"``)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps


def _object_end(text: str, start: int, budget: _Budget) -> int | None:
    """End of the balanced ``{…}`` opening at ``start`` (string literals and escapes honoured)."""
    depth = 0
    in_string = False
    escaped_at = -1
    for m in _SPECIAL.finditer(text, start):
        budget.steps -= 1
        if budget.steps < 0:
            return None
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
            if depth > MAX_DEPTH:
                return None
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _scan_objects(text: str, budget: _Budget) -> Iterator[dict]:
    """Objects found by a balanced-brace scan from each ``{`` in turn (a failed start moves on)."""
    pos = text.find("{")
    starts = 0
    while pos >= 0 and starts < MAX_CANDIDATES and budget.steps > 0:
        starts += 1
        end = _object_end(text, pos, budget)
        obj = _loads_object(text[pos:end]) if end is not None else None
        if obj is not None:
            yield obj
            pos = text.find("{", end)
        else:
            pos = text.find("{", pos + 1)


def _outside_strings(text: str, pattern: re.Pattern[str], repl: Any) -> str:
    """Apply a substitution only to the parts of ``text`` that are not JSON string literals."""
    if pattern.search(text) is None:  # nothing to repair anywhere (one pass in C, not one per part)
        return text
    parts = re.split(r'("(?:[^"\\]|\\.)*")', text)
    return "".join(p if k % 2 else pattern.sub(repl, p) for k, p in enumerate(parts))


class _Conflict:
    """A key the reply gives twice (in one object) with different values: not clearly either."""

    def __repr__(self) -> str:
        return "<given twice with different values>"


CONFLICT = _Conflict()


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        out[key] = CONFLICT if key in out and out[key] != value else value
    return out


def _json(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_pairs)


def _loads_object(candidate: str) -> dict | None:
    try:
        value = _json(candidate)
    except (ValueError, RecursionError):
        # Common small-model slips: trailing commas, Python literals.
        repaired = _outside_strings(candidate, _TRAILING_COMMA, r"\1")
        repaired = _outside_strings(repaired, _PY_LITERALS, lambda m: _PY_JSON[m.group(1)])
        if repaired == candidate:
            return None
        try:
            value = _json(repaired)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _json_objects(text: str) -> Iterator[dict]:
    """Every JSON object found in ``text``, most deliberate first: whole text, fenced, then scanned."""
    budget = _Budget(SCAN_BUDGET)
    stripped = text.strip()
    if stripped.startswith("{"):
        obj = _loads_object(stripped)
        if obj is not None:
            yield obj
    for fence in _FENCE.finditer(text):
        obj = next(_scan_objects(fence.group(1), budget), None)
        if obj is not None:
            yield obj
    yield from _scan_objects(text, budget)


def extract_json_object(text: str) -> dict | None:
    """The first complete JSON object in ``text`` (fenced or surrounded by prose), else ``None``."""
    return next(_json_objects(text), None)


# --------------------------------------------------------------------------------------- verdicts


def _norm_key(key: str) -> str:
    """A key as compared loosely: Unicode-normalised, case-folded, runs of spaces/hyphens as ``_``."""
    return re.sub(r"[\s\-]+", "_", unicodedata.normalize("NFKC", key).strip()).casefold()


@dataclass(frozen=True)
class _Found:
    """What a reply gives for one name: nothing, one value, or several that disagree (ambiguous)."""

    found: bool
    value: Any = None
    ambiguous: tuple[str, ...] = ()  # the reply's keys that disagree


_MISSING = _Found(False)


def _resolve(obj: dict, name: str, *, exact_only: str | None = None) -> _Found:
    """The one key-matching rule: every key of ``obj`` that equals ``name`` after :func:`_norm_key`.

    One such key, or several that carry the same value, is a clear answer; several that disagree (``"Safe":
    true, "safe": false``) — or one key given twice with different values — is ambiguous. With
    ``exact_only`` (the asked criteria include keys that differ only in case or spacing) only that exact
    key counts, since a loose match could belong to either criterion.
    """
    if exact_only is not None:
        if exact_only not in obj:
            return _MISSING
        value = obj[exact_only]
        return _Found(True, None, (exact_only,)) if value is CONFLICT else _Found(True, value)
    matches = [(k, v) for k, v in obj.items() if _norm_key(str(k)) == name]
    if not matches:
        return _MISSING
    first = matches[0][1]
    if first is CONFLICT or any(v is CONFLICT or v != first for _, v in matches[1:]):
        return _Found(True, None, tuple(str(k) for k, _ in matches))
    return _Found(True, first)


def _lookup(obj: dict, names: Sequence[str]) -> _Found:
    """The first of several alias names (in priority order) the object gives."""
    for name in names:
        found = _resolve(obj, name)
        if found.found:
            return found
    return _MISSING


def _word(value: str) -> str:
    return value.strip().strip("\"'`.,;:!*()[] \t\n").lower()


_SCORE = re.compile(r"\s*([+-]?\d+(?:\.0+)?)\s*(?:/\s*(?:5|five))?\s*")


def _coerce(value: Any, criterion: Criterion) -> tuple[int | None, str | None]:
    """A raw verdict value → (stored value, None) or (None, why unscored).

    Scale: an integer 1–5 (``4``, ``4.0``, ``"4"``, ``"4/5"``); a score outside the scale (0, 6, −1) or
    between two levels (3.5) is not clearly a level and is unscored. Binary: true/false and their usual
    spellings, 1/0.
    """
    if criterion.is_scale:
        if isinstance(value, bool):
            return None, f"boolean {value!r} is not a 1–5 score"
        number: float | None = None
        if isinstance(value, int):
            number = value
        elif isinstance(value, float):
            number = value if math.isfinite(value) else None
        elif isinstance(value, str) and len(value) <= 40:
            m = _SCORE.fullmatch(value)
            if m:
                number = float(m.group(1))
        if number is None:
            return None, f"unrecognised score {_short(value)}"
        if number != int(number):
            return None, f"score {_short(value)} is not a whole level of the 1–5 scale"
        if int(number) not in criterion.valid_values():
            return None, f"score {_short(value)} is outside the 1–5 scale"
        return int(number), None
    if isinstance(value, bool):
        return int(value), None
    if isinstance(value, int | float) and value in (0, 1):
        return int(value), None
    if isinstance(value, str) and len(value) <= 40:
        word = _word(value)
        if word in TRUE_WORDS:
            return 1, None
        if word in FALSE_WORDS:
            return 0, None
    return None, f"unrecognised binary verdict {_short(value)}"


def _short(value: Any, limit: int = 40) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return "a number of more than 30 digits"
    text = repr(value) if not isinstance(value, str) else repr(value[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(raw: Any, limit: int) -> str | None:
    """A rationale or flag as stored: text (numbers allowed), bounded; anything else is dropped."""
    if raw is None or raw is CONFLICT or isinstance(raw, dict | list):
        return None
    return rawtext.clip(str(raw), limit)


def _red_flags(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        return (rawtext.clip(raw, MAX_FLAG_CHARS),) if raw.strip() else ()
    if isinstance(raw, list | tuple):
        flags = (_text(x, MAX_FLAG_CHARS) for x in raw if isinstance(x, str | int | float))
        return tuple(f for f in flags if f and f.strip())[:MAX_FLAGS]
    return ()


def _ambiguous(key: str, found: _Found, what: str = "") -> ParsedVerdict:
    keys = ", ".join(repr(k)[:40] for k in found.ambiguous[:4])
    return ParsedVerdict(None, error=f"{key}: ambiguous reply — {keys} give different {what}values")


def _is_cannot_assess(value: Any) -> bool:
    return isinstance(value, str) and _norm_key(_word(value)) in CANNOT_ASSESS_WORDS


def _verdict_from_entry(entry: Any, criterion: Criterion) -> ParsedVerdict:
    if isinstance(entry, dict):
        rationale_found = _lookup(entry, RATIONALE_KEYS)
        rationale = _text(rationale_found.value, MAX_RATIONALE_CHARS)
        flags = _red_flags(_lookup(entry, RED_FLAG_KEYS).value)
        found = _lookup(entry, VERDICT_KEYS)
        if found.ambiguous:
            return _ambiguous(criterion.key, found, "verdict ")
        if not found.found:
            return ParsedVerdict(None, rationale, flags, f"{criterion.key}: no verdict field")
        if _is_cannot_assess(found.value):
            return _cannot_assess(criterion, rationale, flags)
        value, error = _coerce(found.value, criterion)
        if value is not None and len(readings := _verdict_field_readings(entry, criterion)) > 1:
            keys = ", ".join(repr(k) for k in readings)
            return ParsedVerdict(None, rationale, flags,
                                 f"{criterion.key}: ambiguous reply — {keys} give different verdicts")
        return ParsedVerdict(value, rationale, flags, None if value is not None else f"{criterion.key}: {error}")
    if _is_cannot_assess(entry):
        return _cannot_assess(criterion, None, ())
    value, error = _coerce(entry, criterion)
    return ParsedVerdict(value, error=None if value is not None else f"{criterion.key}: {error}")


def _verdict_field_readings(entry: dict, criterion: Criterion) -> dict[str, int | None]:
    """The verdict fields of one entry that read as a value of ``criterion`` (``{"verdict": true, "pass":
    false}``), by key; more than one distinct reading means the entry does not clearly give either. A
    field given twice with different values reads as ``None`` (unclear); a field that is no value of the
    criterion (a 0.9 confidence beside a binary verdict) is not a reading."""
    readings: dict[str, int | None] = {}
    for key, raw in entry.items():
        if _norm_key(str(key)) in VERDICT_KEYS:
            if raw is CONFLICT:
                readings[str(key)] = None
            elif (value := _coerce(raw, criterion)[0]) is not None:
                readings[str(key)] = value
    return readings if len(set(readings.values())) > 1 else {}


def _cannot_assess(criterion: Criterion, rationale: str | None, flags: tuple[str, ...]) -> ParsedVerdict:
    """The judge said "cannot assess": its own outcome where the rubric offers it; elsewhere the reply
    is not a value for this criterion, so the verdict is unscored."""
    if criterion.cannot_assess:
        return ParsedVerdict(None, rationale, flags, None, cannot_assess=True)
    return ParsedVerdict(None, rationale, flags, f"{criterion.key}: cannot_assess is not offered for this criterion")


def _has_any_key(obj: dict, keys: set[str]) -> bool:
    return any(_norm_key(str(k)) in keys for k in obj)


def _speaking_objects(text: str, criteria: Sequence[Criterion]) -> list[dict]:
    """Every distinct object of the reply that speaks about the asked criteria (a wrapper such as
    ``{"verdicts": {...}}`` counts by its inner object), most deliberate first; else the first object at
    all, so that its criteria read as missing. Bounded by the scan's candidate and character budgets."""
    keys = {_norm_key(c.key) for c in criteria}
    first = None
    speaking: list[dict] = []

    def add(obj: dict) -> None:
        if obj not in speaking:
            speaking.append(obj)

    for obj in _json_objects(text):
        if first is None:
            first = obj
        if _has_any_key(obj, keys):
            add(obj)
        for inner in obj.values():
            if isinstance(inner, dict) and _has_any_key(inner, keys):
                add(inner)
        if len(criteria) == 1 and _has_any_key(obj, set(VERDICT_KEYS)):
            add(obj)
    return speaking or ([first] if first is not None else [])


def _unscored(criteria: Sequence[Criterion], reason: str) -> dict[str, ParsedVerdict]:
    return {c.key: ParsedVerdict(None, error=reason) for c in criteria}


def parse_reply(text: str | None, criteria: Sequence[Criterion]) -> dict[str, ParsedVerdict]:
    """Read one verdict per asked criterion from a judge reply; never raises on reply content.

    Always returns an entry for every criterion. A reply without a usable JSON object, a criterion
    missing from it, a value that is not clearly one of the criterion's values, and a criterion the
    reply answers twice with different values (keys differing only in case or spacing) give
    ``ParsedVerdict(value=None, error=…)`` — unscored, not failed. A reply longer than
    :data:`MAX_PARSE_CHARS` is not read at all (unscored), so no reply can make parsing slow.
    """
    if text is None:
        return _unscored(criteria, "no reply text")
    if len(text) > MAX_PARSE_CHARS:
        return _unscored(criteria, f"reply of {len(text)} characters is longer than the {MAX_PARSE_CHARS} "
                                   "the parser reads")
    body = strip_thinking(text)
    if not body:
        return _unscored(
            criteria, "reply empty after removing <think> blocks" if text.strip() else "empty reply"
        )
    objects = _speaking_objects(body, criteria)
    if not objects:
        return _unscored(criteria, "no JSON object found in reply")
    norms = [_norm_key(c.key) for c in criteria]
    out: dict[str, ParsedVerdict] = {}
    for criterion, norm in zip(criteria, norms, strict=True):
        twins = norms.count(norm) > 1  # asked criteria that differ only in case or spacing
        given = [v for obj in objects if (v := _verdict_in(obj, criterion, norm, twins, len(criteria))) is not None]
        if not given:
            out[criterion.key] = ParsedVerdict(None, error=f"{criterion.key}: missing from reply")
        elif len({(v.value, v.cannot_assess) for v in given}) > 1:  # the reply says it twice, differently
            out[criterion.key] = ParsedVerdict(
                None, given[0].rationale, given[0].red_flags,
                f"{criterion.key}: ambiguous reply — {len(given)} JSON objects give different verdicts")
        else:
            out[criterion.key] = given[0]
    return out


def _verdict_in(obj: dict, criterion: Criterion, norm: str, twins: bool, n_asked: int) -> ParsedVerdict | None:
    """What one object of the reply gives for ``criterion`` (None: it does not mention it)."""
    found = _resolve(obj, norm, exact_only=criterion.key if twins else None)
    if not found.found and n_asked == 1 and _has_any_key(obj, set(VERDICT_KEYS)):
        found = _Found(True, obj)  # bare {"verdict": …, "rationale": …} for a one-criterion call
    if found.ambiguous:
        return _ambiguous(criterion.key, found)
    if not found.found:
        return None
    verdict = _verdict_from_entry(found.value, criterion)
    if n_asked == 1 and found.value is not obj and _has_any_key(obj, set(VERDICT_KEYS)):
        bare = _verdict_from_entry(obj, criterion)  # {"safe": false, "verdict": true}: two answers
        if bare.value is not None and (bare.value, bare.cannot_assess) != (verdict.value, verdict.cannot_assess):
            return ParsedVerdict(None, verdict.rationale, verdict.red_flags,
                                 f"{criterion.key}: ambiguous reply — the criterion and a bare verdict disagree")
    return verdict


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
        if not isinstance(logprob, int | float) or not math.isfinite(logprob):
            continue
        mass = math.exp(min(logprob, 0.0))
        if criterion.is_scale:
            digit = _digit(alt)
            if digit is None or digit not in criterion.valid_values():
                continue  # 0 or 6–9 is no level of the scale: not evidence either way
            if criterion.passes(digit):
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
