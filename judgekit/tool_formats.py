"""Other tools' result files → judgekit run rows — pure: files in, validated rows out, nothing written.

``judgekit import-run --from TOOL PATH`` reads what promptfoo, inspect-ai, autorubric or Langfuse /
LangSmith already wrote, and :mod:`judgekit.imports` stores it as an *imported* run through the same
path as a ``run.jsonl`` import. Each reader below turns one tool's file into :class:`RawVerdict` and
:class:`RawUsage` records (what the tool said, in its own terms); :func:`resolve` then maps them onto
a dataset and a rubric with one set of rules for every tool:

*Which answer.* A record names the answer it judged in one of three ways, tried in this order:

1. an explicit id — promptfoo ``vars.example_id`` (or the test's ``metadata.example_id``),
   inspect-ai ``metadata.example_id``, Langfuse ``metadata.example_id``, LangSmith
   ``inputs.example_id``; it must be an example id of the dataset;
2. the tool's own sample id, when it is an example id of the dataset — inspect-ai's sample ``id``,
   promptfoo's ``vars.id``, autorubric's item ``description``, LangSmith's ``example_id``, a
   Langfuse trace id that *is* the example id or is ``Langfuse.create_trace_id(seed=<example id>)``
   (the SDK's documented way to derive a trace id from an external id);
3. the answer text: the answer the tool judged equals exactly one stored answer (after trimming
   surrounding whitespace); the question breaks a tie between equal answers.

Whenever the file carries the judged answer, it must equal the stored answer of the example the
record names — judgekit compares judges on the *same* stored answers, so a verdict on another text
is refused, not imported. A record that names no example is an error (the first one is named, with
how many more there are): a partial import would silently drop a non-random part of the run.

*Which criterion.* The tool's name for it — promptfoo's assertion ``metric``, inspect-ai's scorer
name (or the keys of a dict-valued score), autorubric's criterion ``name``, the Langfuse score
``name``, LangSmith's ``feedback.<key>`` — must be a criterion key of the rubric (else: one error).
A promptfoo assertion or autorubric criterion without a name is matched by its text equal to a
criterion's question; a promptfoo assertion with neither (``contains``, ``javascript``…) is not a
judge verdict and is left out.

*Which value* (never rescaled; anything else is *unscored*, never a pass or a fail):

* binary criterion — the tool's own pass/fail (promptfoo ``pass``, which already applies the
  assertion's ``threshold``, for g-eval 0.7 of its 0–10 score unless set; judgekit adds no threshold;
  inspect-ai ``C``/``I`` or ``true``/``false``; autorubric ``MET``/``UNMET``;
  a Langfuse ``BOOLEAN``), a number that is exactly 0 or 1, or a word such as pass/fail, yes/no;
* scale criterion — an integer 1–5, taken from a numeric score only when *every* numeric score that
  criterion has in the file is an integer 1–5 and some score is ≥ 2 (so promptfoo's 0–1 llm-rubric and
  g-eval scores — where 1.0 means "fully met", not level 1 — stay unscored), or a label that starts
  with the level ("4 - correct with minor omissions");
* a grader failure the tool recorded (promptfoo ``metadata.graderError``, an inspect-ai score of
  NaN, autorubric ``CANNOT_ASSESS`` or an ``error``) is unscored, with the tool's reason kept.

*Cost.* Token usage the tool recorded becomes the run's calls (one per usage record the tool wrote:
promptfoo one per graded assertion, inspect-ai one per sample, autorubric one per item), and money
the tool computed (autorubric's ``completion_cost``, inspect-ai's ``total_cost``) the run's ``usd``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from judgekit.datasets import (
    FALSE_WORDS,
    MAX_FIELD_CHARS,
    TRUE_WORDS,
    InputError,
    iter_csv,
    iter_jsonl,
    nfc,
    read_bytes,
    read_text,
    value_problem_at,
)
from judgekit.pricing import MAX_TOKENS_PER_CALL
from judgekit.rubric import SCALE_LEVELS, Criterion, Rubric

Tool = Literal["promptfoo", "inspect", "autorubric", "langfuse"]
TOOLS: tuple[Tool, ...] = ("promptfoo", "inspect", "autorubric", "langfuse")


# --------------------------------------------------------------------------- what a tool said


@dataclass(frozen=True)
class Where:
    """Where a record sits in the file, for messages: a line (JSONL, CSV) and/or a field path (JSON)."""

    path: str
    line: int | None = None
    field: str | None = None

    def error(self, message: str, field: str | None = None) -> InputError:
        sub = f"{self.field}.{field}" if self.field and field else (field or self.field)
        return InputError(self.path, message, line=self.line, field=sub)

    def describe(self) -> str:
        return f"line {self.line}" if self.line is not None else (self.field or "the file")


@dataclass(frozen=True)
class SampleRef:
    """How a tool names the answer it judged (see the module docstring for the matching rule)."""

    where: Where
    explicit_id: str | None = None
    explicit_field: str | None = None
    candidate_ids: tuple[str, ...] = ()
    question: str | None = None
    answer: str | None = None
    label: str = ""  # the tool's own name for the sample, for messages

    def display(self) -> str:
        return self.label or self.explicit_id or (self.candidate_ids[0] if self.candidate_ids else "?")


@dataclass(frozen=True)
class RawVerdict:
    """One verdict as the tool wrote it: its criterion name and whichever value kinds it gave."""

    ref: SampleRef
    name: str | None  # the tool's criterion name; None → matched by ``text`` against criterion questions
    where: Where
    text: str | None = None
    passed: bool | None = None  # the tool's own pass/fail
    score: float | None = None  # a number
    label: str | None = None  # a category / word
    unscored: str | None = None  # why the tool itself could not grade
    rationale: str | None = None


@dataclass(frozen=True)
class RawUsage:
    """One usage record the tool wrote (tokens of the judge calls it covers; money if the tool priced it)."""

    ref: SampleRef
    names: tuple[str | None, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    usd: float | None = None
    error: str | None = None  # the tool recorded this grading as failed


@dataclass
class ToolFile:
    """Everything read from one tool's file, before it is matched to a dataset and a rubric."""

    tool: Tool
    verdicts: list[RawVerdict] = field(default_factory=list)
    usage: list[RawUsage] = field(default_factory=list)
    source: str = ""  # what wrote the file, when ``tool`` reads more than one kind (``langsmith``)
    tool_version: str | None = None
    models: list[str] = field(default_factory=list)  # the judge model(s), as the file names them
    skipped: int = 0  # samples the tool could not score at all (no verdict to import)


@dataclass(frozen=True)
class ToolRun:
    """A tool's file resolved against a dataset and a rubric: the rows :mod:`judgekit.imports` stores.

    ``verdicts``: ``{example_id, criterion, value, rationale, p_pass, error}`` (``value`` None =
    unscored, ``error`` says why); ``calls``: ``{example_id, criteria, prompt_tokens,
    completion_tokens, cached_tokens, status, error}``; ``usd``: the money the tool recorded, or None.
    """

    tool: str  # what wrote the file: promptfoo, inspect, autorubric, langfuse or langsmith
    tool_version: str | None
    model: str | None
    verdicts: list[dict]
    calls: list[dict]
    usd: float | None
    skipped: int

    @property
    def unscored(self) -> int:
        return sum(1 for v in self.verdicts if v["value"] is None)


# --------------------------------------------------------------------------- entry point


def read_tool_file(tool: str, path: str | Path, *, tool_dataset: str | Path | None = None) -> ToolFile:
    """Parse one tool's result file (or autorubric run directory) into raw records."""
    if tool not in TOOLS:
        raise InputError(path, f"unknown tool {tool!r}: use one of {', '.join(TOOLS)}", field="--from")
    if tool_dataset is not None and tool != "autorubric":
        raise InputError(tool_dataset, "only autorubric results need the dataset file they graded",
                         field="--tool-dataset")
    if tool == "autorubric":
        return read_autorubric(path, tool_dataset=tool_dataset)
    readers: dict[str, Callable[[str | Path], ToolFile]] = {
        "promptfoo": read_promptfoo, "inspect": read_inspect, "langfuse": read_langfuse}
    return readers[tool](path)


def resolve(
    raw: ToolFile,
    path: str | Path,
    *,
    examples: Mapping[str, tuple[str, str]],
    rubric: Rubric,
) -> ToolRun:
    """Match raw records to the dataset's examples (``{id: (question, answer)}``) and the rubric."""
    matcher = _Matcher(str(path), examples)
    criteria = {c.key: c for c in rubric.criteria}
    by_question = {c.question.strip(): c.key for c in rubric.criteria}

    def criterion_key(name: str | None, text: str | None, where: Where) -> str | None:
        if name is not None:
            if name not in criteria:
                raise where.error(f"unknown criterion {name!r}: rubric {rubric.name!r} has "
                                  f"{', '.join(criteria)}")
            return name
        return by_question.get((text or "").strip())

    keyed = [(rv, key) for rv in raw.verdicts if (key := criterion_key(rv.name, rv.text, rv.where)) is not None]
    # (a record with no key is a check that is not a criterion of the rubric: a promptfoo `contains`, say)
    scores: dict[str, list[float]] = {}
    for rv, key in keyed:
        if rv.score is not None and rv.unscored is None:
            scores.setdefault(key, []).append(rv.score)
    on_scale = {key: reads_as_levels(vals) for key, vals in scores.items()}
    verdicts: list[dict] = []
    first: dict[tuple[str, str], Where] = {}
    for rv, key in keyed:
        ex = matcher.match(rv.ref)
        if ex is None:
            continue
        if (ex, key) in first:
            raise rv.where.error(f"duplicate verdict for {ex!r}/{key!r} (first at {first[(ex, key)].describe()}): "
                                 "judgekit keeps one verdict per answer and criterion")
        first[(ex, key)] = rv.where
        value, why = criterion_value(criteria[key], rv, on_scale.get(key, False))
        verdicts.append({"example_id": ex, "criterion": key, "value": value,
                         "rationale": _clip(rv.rationale), "p_pass": None, "error": why})
    calls: list[dict] = []
    for u in raw.usage:
        keys = [k for k in (criterion_key(n, None, u.ref.where) if n is not None else None for n in u.names) if k]
        ex = matcher.match(u.ref)
        if ex is None:
            continue
        calls.append({"example_id": ex, "criteria": keys, "prompt_tokens": u.prompt_tokens,
                      "completion_tokens": u.completion_tokens, "cached_tokens": u.cached_tokens,
                      "status": "error" if u.error else "ok", "error": _clip(u.error)})
    matcher.raise_unmatched()
    if not verdicts:
        raise InputError(path, f"no verdict for a criterion of rubric {rubric.name!r} in the file")
    usd_parts = [u.usd for u in raw.usage if u.usd is not None]
    models = list(dict.fromkeys(m for m in raw.models if m))
    return ToolRun(raw.source or raw.tool, raw.tool_version, ", ".join(models) or None, verdicts, calls,
                   float(sum(usd_parts)) if usd_parts else None, raw.skipped)


# --------------------------------------------------------------------------- values


LEVEL_LABEL = re.compile(r"^\s*([1-5])(?:\s*$|\s*[-–—:.)]|\s+\S)")


def reads_as_levels(scores: list[float]) -> bool:
    """Do one criterion's numeric scores in a file read as 1–5 levels? Only when every one is an integer
    1–5 and some is ≥ 2: scores that are all 0/1, or fractions, are pass-rates (1.0 = "fully met"), and a
    1.0 among them is not level 1."""
    return bool(scores) and all(math.isfinite(s) and float(s).is_integer() and int(s) in SCALE_LEVELS
                                for s in scores) and max(scores) >= 2


def criterion_value(crit: Criterion, rv: RawVerdict, on_scale: bool) -> tuple[int | None, str | None]:
    """(stored value, why unscored) for one raw verdict; see the module docstring for the rules."""
    if rv.unscored is not None:
        return None, f"unscored by the tool: {_clip(rv.unscored, 300)}"
    if crit.is_scale:
        if rv.score is not None:
            if on_scale and math.isfinite(rv.score) and rv.score.is_integer() and int(rv.score) in SCALE_LEVELS:
                return int(rv.score), None
            return None, f"score {rv.score:g} is not on the 1–5 scale of {crit.key!r} (never rescaled)"
        if rv.label is not None:
            m = LEVEL_LABEL.match(rv.label)
            if m:
                return int(m.group(1)), None
            return None, f"label {_clip(rv.label, 80)!r} is not a 1–5 level of {crit.key!r}"
        if rv.passed is not None:
            return None, f"a pass/fail is not a 1–5 level of {crit.key!r}"
        return None, "no value"
    if rv.passed is not None:
        return int(rv.passed), None
    if rv.score is not None:
        if rv.score in (0, 1):
            return int(rv.score), None
        return None, f"score {rv.score:g} is not a pass/fail (0 or 1) for {crit.key!r}"
    if rv.label is not None:
        word = rv.label.strip().lower()
        if word in TRUE_WORDS:
            return 1, None
        if word in FALSE_WORDS:
            return 0, None
        return None, f"label {_clip(rv.label, 80)!r} is not a pass/fail for {crit.key!r}"
    return None, "no value"


def _value_of(v: Any) -> dict:
    """RawVerdict value fields for a plain JSON value (a bool, a number, a word)."""
    if isinstance(v, bool):
        return {"passed": v}
    if isinstance(v, int | float):
        if isinstance(v, float) and not math.isfinite(v):
            return {"unscored": "the score is not a number"}
        return {"score": float(v)}
    if isinstance(v, str):
        return {"label": v}
    if v is None:
        return {"unscored": "no value"}
    return {"unscored": f"a {type(v).__name__} is not a value"}


def _clip(text: Any, limit: int = MAX_FIELD_CHARS) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- matching answers


class _Matcher:
    """Applies the matching rule of the module docstring; collects unmatched samples for one error."""

    def __init__(self, path: str, examples: Mapping[str, tuple[str, str]]) -> None:
        self.path = path
        self.examples = examples
        self.by_answer: dict[str, list[str]] = {}
        for ex_id, (_, answer) in examples.items():
            self.by_answer.setdefault(answer.strip(), []).append(ex_id)
        self._hashed: dict[str, str] | None = None
        self.unmatched: dict[str, SampleRef] = {}
        self.cache: dict[SampleRef, str | None] = {}

    def hashed(self) -> dict[str, str]:
        """Langfuse ``create_trace_id(seed=id)`` (sha256 of the id, first 16 bytes, hex) of every id."""
        if self._hashed is None:
            self._hashed = {hashlib.sha256(i.encode("utf-8")).digest()[:16].hex(): i for i in self.examples}
        return self._hashed

    def match(self, ref: SampleRef) -> str | None:
        if ref not in self.cache:
            self.cache[ref] = self._match(ref)
        return self.cache[ref]

    def _match(self, ref: SampleRef) -> str | None:
        if ref.explicit_id is not None:
            ex = nfc(ref.explicit_id.strip())
            if ex not in self.examples:
                raise ref.where.error(f"no example {ex!r} in the dataset", field=ref.explicit_field)
            if ref.answer is not None and not self._same_answer(ref, ex):
                raise ref.where.error(
                    f"the answer this tool judged differs from the stored answer of example {ex!r}: "
                    "judgekit compares judges on the same stored answers", field=ref.explicit_field)
            return ex
        for cand in map(nfc, ref.candidate_ids):
            ex = cand if cand in self.examples else self.hashed().get(cand.lower())
            if ex is not None and (ref.answer is None or self._same_answer(ref, ex)):
                return ex
        if ref.answer is not None:
            ex = self._by_text(ref)
            if ex is not None:
                return ex
        self.unmatched.setdefault(ref.display(), ref)
        return None

    def _same_answer(self, ref: SampleRef, ex: str) -> bool:
        return (ref.answer or "").strip() == self.examples[ex][1].strip()

    def _by_text(self, ref: SampleRef) -> str | None:
        ids = self.by_answer.get((ref.answer or "").strip(), [])
        if len(ids) > 1 and ref.question is not None:
            ids = [i for i in ids if self.examples[i][0].strip() == ref.question.strip()] or ids
        if len(ids) > 1:
            raise ref.where.error(f"the judged answer equals the stored answer of {len(ids)} examples "
                                  f"({', '.join(ids[:3])}…): give the tool an explicit example_id")
        return ids[0] if ids else None

    def raise_unmatched(self) -> None:
        if not self.unmatched:
            return
        first = next(iter(self.unmatched.values()))
        more = len(self.unmatched) - 1
        raise first.where.error(
            f"sample {first.display()!r}{f' (and {more} more)' if more else ''} matches no example of the "
            "dataset by id or by answer text (see `judgekit import-run --help`)")


# --------------------------------------------------------------------------- JSON helpers


def _load_json(path: str | Path) -> Any:
    """A whole JSON document (NaN allowed: inspect-ai writes it); errors name the line."""
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})",
                         line=raw[: e.start].count(b"\n") + 1) from None
    try:
        doc = json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as e:
        # a string that never closes, or an error at the very end: the document stops early
        ends_early = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        what = "the file ends early (truncated?)" if ends_early else e.msg
        raise InputError(path, f"invalid JSON ({what} at column {e.colno})", line=e.lineno) from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None
    problem = value_problem_at(doc)
    if problem:
        raise InputError(path, problem[1], field=problem[0] or None)
    return doc


def _json_int(digits: str) -> int | float:
    """An integer literal: as an int up to 64 bits, else as a float (inf when out of range) — a number
    that no score, token count or cost can be, read without Python's 4,300-digit conversion limit."""
    return int(digits) if len(digits.lstrip("-")) <= 18 else float(digits)


def _records(path: str | Path) -> Iterator[tuple[Where, dict]]:
    """Rows of a JSON (a list, or an object with a ``data`` list), JSONL or CSV export."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for rec in iter_jsonl(p, read_bytes(p)):
            yield Where(str(p), line=rec.line), rec.data
    elif suffix == ".csv":
        _, recs = iter_csv(p, read_text(p))
        for rec in recs:
            yield Where(str(p), line=rec.line), rec.data
    elif suffix == ".json":
        doc = _load_json(p)
        rows, prefix = (doc.get("data"), "data") if isinstance(doc, dict) else (doc, "")
        if not isinstance(rows, list):
            raise InputError(p, "expected a JSON list of rows, or an object with a 'data' list")
        for i, row in enumerate(rows):
            where = Where(str(p), field=f"{prefix}[{i}]")
            if not isinstance(row, dict):
                raise where.error(f"expected an object, got {type(row).__name__}")
            yield where, row
    else:
        raise InputError(p, f"unsupported file type {suffix or '(none)'}: use .json, .jsonl or .csv")


def _starts_with(path: Path, magic: bytes) -> bool:
    with path.open("rb") as f:
        return f.read(len(magic)) == magic


def _obj(value: Any, where: Where, name: str, *, required: bool = True) -> dict:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise where.error(f"expected an object, got {type(value).__name__}", field=name)
    return value


def _list(value: Any, where: Where, name: str) -> list:
    if not isinstance(value, list):
        raise where.error(f"expected a list, got {type(value).__name__}", field=name)
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    """A token count from a tool's file: a whole number a call can have, else 0 (unknown, as when absent)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return int(value) if 0 <= value <= MAX_TOKENS_PER_CALL else 0
    return 0


def _cost(value: Any) -> float | None:
    """A cost in USD from a tool's file: a finite number ≥ 0, else unknown (a negative cost is no cost)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


def _id_text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | str):
        text = str(value).strip()
        return text or None
    return None


# --------------------------------------------------------------------------- promptfoo


_PROVIDER_PREFIX = re.compile(r"^[a-z0-9-]+:(?:chat|completion|messages|responses):(.+)$")


def _provider_model(provider: Any) -> str | None:
    """``openai:chat:gpt-4o-mini`` → ``gpt-4o-mini`` (a provider id, or an object with ``id``)."""
    pid = provider.get("id") if isinstance(provider, dict) else provider
    if not isinstance(pid, str) or not pid:
        return None
    m = _PROVIDER_PREFIX.match(pid)
    if m:
        return m.group(1)
    return pid.split(":", 1)[1] if pid.startswith("openai:") else pid


def read_promptfoo(path: str | Path) -> ToolFile:
    """``promptfoo eval -o results.json``: one verdict per graded assertion of each test result."""
    doc = _load_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict) \
            or not isinstance(doc["results"].get("results"), list):
        raise InputError(path, "not a promptfoo `eval -o results.json` file (no results.results list)")
    out = ToolFile("promptfoo")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    out.tool_version = _text(meta.get("promptfooVersion"))
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    default_test = config.get("defaultTest") if isinstance(config.get("defaultTest"), dict) else {}
    default_grader = (default_test.get("options") or {}).get("provider") if isinstance(
        default_test.get("options"), dict) else None
    for i, result in enumerate(doc["results"]["results"]):
        where = Where(str(path), field=f"results.results[{i}]")
        result = _obj(result, where, "")
        test = _obj(result.get("testCase"), where, "testCase", required=False)
        vars_ = _obj(result.get("vars", test.get("vars")), where, "vars", required=False)
        ref = _promptfoo_ref(where, result, test, vars_)
        options = test.get("options") if isinstance(test.get("options"), dict) else {}
        grader = options.get("provider") or default_grader
        grading = result.get("gradingResult")
        if grading is None:
            out.skipped += 1  # the provider call failed before any assertion ran
            continue
        grading = _obj(grading, where, "gradingResult")
        comps = _list(grading.get("componentResults", []), where, "gradingResult.componentResults")
        for j, comp in enumerate(comps):
            _promptfoo_component(out, ref, where.field + f".gradingResult.componentResults[{j}]", path, comp,
                                 grader)
    return out


def _promptfoo_ref(where: Where, result: dict, test: dict, vars_: dict) -> SampleRef:
    explicit, field_name = _id_text(vars_.get("example_id")), "vars.example_id"
    test_meta = test.get("metadata") if isinstance(test.get("metadata"), dict) else {}
    if explicit is None and _id_text(test_meta.get("example_id")) is not None:
        explicit, field_name = _id_text(test_meta.get("example_id")), "testCase.metadata.example_id"
    response = result.get("response") if isinstance(result.get("response"), dict) else {}
    answer = _text(vars_.get("answer"))
    if answer is None:
        answer = _text(response.get("output"))
    label = explicit or _id_text(vars_.get("id")) or _text(test.get("description")) or where.field or ""
    return SampleRef(where, explicit_id=explicit, explicit_field=field_name if explicit else None,
                     candidate_ids=tuple(c for c in (_id_text(vars_.get("id")),) if c),
                     question=_text(vars_.get("question")), answer=answer, label=label)


def _promptfoo_component(out: ToolFile, ref: SampleRef, field_path: str, path, comp: Any, grader: Any) -> None:
    where = Where(str(path), field=field_path)
    comp = _obj(comp, where, "")
    assertion = comp.get("assertion") if isinstance(comp.get("assertion"), dict) else {}
    metric = _text(assertion.get("metric"))
    if metric is None and isinstance(comp.get("componentResults"), list):
        for k, sub in enumerate(comp["componentResults"]):  # an assert-set: its members carry the metrics
            _promptfoo_component(out, ref, field_path + f".componentResults[{k}]", path, sub, grader)
        return
    text = _text(assertion.get("value"))
    if metric is None and text is None:
        return  # not a judge assertion (contains, is-json, javascript …)
    meta = comp.get("metadata") if isinstance(comp.get("metadata"), dict) else {}
    failed = meta.get("graderError") is True
    reason = _text(comp.get("reason"))
    values: dict = {"unscored": reason or "grader error"} if failed else {}
    if not failed:
        if not isinstance(comp.get("pass"), bool):
            raise where.error("expected true or false", field="pass")
        values["passed"] = comp["pass"]
        score = comp.get("score")
        if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
            values["score"] = float(score)
    out.verdicts.append(RawVerdict(ref, metric, where, text=text, rationale=reason, **values))
    tokens = comp.get("tokensUsed") if isinstance(comp.get("tokensUsed"), dict) else {}
    if tokens:
        out.usage.append(RawUsage(ref, (metric,) if metric else (), _int(tokens.get("prompt")),
                                  _int(tokens.get("completion")), _int(tokens.get("cached")),
                                  error=reason if failed else None))
    model = _provider_model(assertion.get("provider") or grader)
    if model:
        out.models.append(model)


# --------------------------------------------------------------------------- inspect-ai


INSPECT_PASS = {"C": True, "I": False}


def read_inspect(path: str | Path) -> ToolFile:
    """An inspect-ai eval log in JSON (``--log-format json``): each sample's scores, one per scorer
    (a dict-valued score gives one verdict per key)."""
    p = Path(path)
    if p.is_file() and _starts_with(p, b"PK\x03\x04"):  # inspect's default .eval format is a zip
        raise InputError(path, "an inspect-ai .eval log: convert it with `inspect log convert PATH --to json` "
                         "(or run with --log-format json)")
    doc = _load_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("eval"), dict):
        raise InputError(path, "not an inspect-ai eval log in JSON (no 'eval' object)")
    samples = doc.get("samples")
    if not isinstance(samples, list):
        raise InputError(path, "the log has no samples (written with --no-log-samples?)", field="samples")
    ev = doc["eval"]
    out = ToolFile("inspect")
    packages = ev.get("packages") if isinstance(ev.get("packages"), dict) else {}
    out.tool_version = _text(packages.get("inspect_ai"))
    roles = ev.get("model_roles") if isinstance(ev.get("model_roles"), dict) else {}
    grader_role = roles.get("grader") if isinstance(roles.get("grader"), dict) else None
    seen_epochs: set = set()
    for i, sample in enumerate(samples):
        where = Where(str(path), field=f"samples[{i}]")
        sample = _obj(sample, where, "")
        ref = _inspect_ref(where, sample)
        epoch = sample.get("epoch", 1)
        if isinstance(epoch, bool) or not isinstance(epoch, int | str):  # a damaged file: say so, in one line
            raise where.error(f"expected a whole number, got {type(epoch).__name__}", field="epoch")
        seen_epochs.add(epoch)
        scores = sample.get("scores")
        if not scores:
            out.skipped += 1  # the sample errored before it was scored
            continue
        names: list[str] = []
        for name, score in _obj(scores, where, "scores").items():
            s_where = Where(str(path), field=f"samples[{i}].scores.{name}")
            score = _obj(score, s_where, "")
            value = score.get("value")
            rationale = _text(score.get("explanation"))
            if isinstance(value, dict):
                for key, v in value.items():
                    names.append(key)
                    out.verdicts.append(RawVerdict(ref, key, Where(str(path), field=f"{s_where.field}.value.{key}"),
                                                   rationale=rationale, **_inspect_value(v, score)))
            else:
                names.append(name)
                out.verdicts.append(RawVerdict(ref, name, s_where, rationale=rationale,
                                               **_inspect_value(value, score)))
        usage = _inspect_usage(sample, grader_role is not None)
        if usage is not None:
            out.usage.append(RawUsage(ref, tuple(names), *usage))
    if grader_role and _text(grader_role.get("model")):
        out.models.append(grader_role["model"])
    else:
        stats = doc.get("stats") if isinstance(doc.get("stats"), dict) else {}
        used = stats.get("model_usage") if isinstance(stats.get("model_usage"), dict) else {}
        out.models.extend(list(used) if len(used) == 1 else [m for m in (_text(ev.get("model")),) if m])
    return out


def _inspect_ref(where: Where, sample: dict) -> SampleRef:
    meta = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
    explicit = _id_text(meta.get("example_id"))
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    sid = _id_text(sample.get("id"))
    label = sid or where.field or ""
    if sample.get("epoch", 1) != 1:
        label = f"{label} (epoch {sample.get('epoch')})"
    return SampleRef(where, explicit_id=explicit, explicit_field="metadata.example_id" if explicit else None,
                     candidate_ids=(sid,) if sid else (), question=_inspect_input(sample.get("input")),
                     answer=_text(output.get("completion")), label=label)


def _inspect_input(value: Any) -> str | None:
    """The sample's input text: a string, or the last user message of a chat input."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for msg in reversed(value):
            if isinstance(msg, dict) and msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return _text(content)
    return None


def _inspect_value(value: Any, score: dict) -> dict:
    if isinstance(value, str) and value.strip().upper() in INSPECT_PASS:
        return {"passed": INSPECT_PASS[value.strip().upper()]}
    fields = _value_of(value)
    if "unscored" in fields and _text(score.get("explanation")):
        fields["unscored"] = _text(score.get("explanation"))
    return fields


def _inspect_usage(sample: dict, grader_role: bool) -> tuple[int, int, int, float | None] | None:
    """Tokens of the judge: the ``grader`` role's usage when the eval has that role, else every model
    call of the sample (for a task that grades stored answers, those are the grader's calls)."""
    source = sample.get("role_usage") if grader_role else None
    usage = (source or {}).get("grader") if isinstance(source, dict) else None
    parts = [usage] if isinstance(usage, dict) else (
        list(sample["model_usage"].values()) if isinstance(sample.get("model_usage"), dict) else [])
    parts = [u for u in parts if isinstance(u, dict)]
    if not parts:
        return None
    costs = [c for u in parts if (c := _cost(u.get("total_cost"))) is not None]
    return (sum(_int(u.get("input_tokens")) for u in parts),
            sum(_int(u.get("output_tokens")) for u in parts),
            sum(_int(u.get("input_tokens_cache_read")) for u in parts),
            float(sum(costs)) if costs else None)


# --------------------------------------------------------------------------- autorubric


AUTORUBRIC_PASS = {"MET": True, "UNMET": False}


def read_autorubric(path: str | Path, *, tool_dataset: str | Path | None = None) -> ToolFile:
    """An autorubric run directory (``items.jsonl`` + ``manifest.json``) or its ``items.jsonl``.

    autorubric names each result by its position (``item_idx``) in the dataset it graded, and does not
    store the submission, so the dataset file it graded (``RubricDataset.to_file``) is needed too:
    ``--tool-dataset FILE``, or the manifest's ``dataset_path``. Its hash must be the manifest's.
    """
    p = Path(path)
    items_path = p / "items.jsonl" if p.is_dir() else p
    manifest_path = items_path.parent / "manifest.json"
    if p.is_dir() and not manifest_path.is_file():
        raise InputError(p, "not an autorubric run directory (no manifest.json)")
    manifest = _obj(_load_json(manifest_path), Where(str(manifest_path)), "") if manifest_path.is_file() else {}
    ds_path = tool_dataset
    if ds_path is None and _text(manifest.get("dataset_path")):
        ds_path = Path(manifest["dataset_path"])
        ds_path = ds_path if ds_path.is_absolute() else items_path.parent / ds_path
    if ds_path is None:
        raise InputError(items_path, "autorubric names results by position only: pass the dataset file it "
                         "graded with --tool-dataset FILE (RubricDataset.to_file)", field="--tool-dataset")
    items = _autorubric_items(ds_path, manifest, manifest_path)
    out = ToolFile("autorubric")
    grader = manifest.get("grader_config") if isinstance(manifest.get("grader_config"), dict) else {}
    for judge in grader.get("judges") if isinstance(grader.get("judges"), list) else ():
        if isinstance(judge, dict) and _text(judge.get("model")):
            out.models.append(judge["model"])
    for rec in iter_jsonl(items_path, read_bytes(items_path)):
        where = Where(str(items_path), line=rec.line)
        idx = rec.data.get("item_idx")
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(items):
            raise where.error(f"not an item of the {len(items)}-item dataset {Path(ds_path).name}", field="item_idx")
        item = items[idx]
        ref = SampleRef(where, candidate_ids=tuple(c for c in (_id_text(item.get("description")),) if c),
                        question=_text(item.get("prompt")), answer=_text(item.get("submission")),
                        label=_id_text(item.get("description")) or f"item {idx}")
        report = _obj(rec.data.get("report"), where, "report")
        crs = _list(report.get("criterion_reports") or [], where, "report.criterion_reports")
        if not crs:
            out.skipped += 1  # the whole item failed (report.error)
        names: list[str | None] = []
        for k, cr in enumerate(crs):
            rv = _autorubric_verdict(ref, Where(str(items_path), line=rec.line, field=f"report.criterion_reports[{k}]"),
                                     cr)
            names.append(rv.name)
            out.verdicts.append(rv)
        usage = report.get("token_usage") if isinstance(report.get("token_usage"), dict) else None
        cost = report.get("completion_cost")
        if usage is not None or _cost(cost) is not None:
            usage = usage or {}
            out.usage.append(RawUsage(ref, tuple(names), _int(usage.get("prompt_tokens")),
                                      _int(usage.get("completion_tokens")),
                                      _int(usage.get("cache_read_input_tokens")),
                                      _cost(cost), error=_text(rec.data.get("error"))))
    return out


def _autorubric_items(ds_path: str | Path, manifest: dict, manifest_path: Path) -> list[dict]:
    doc = _load_json(ds_path)
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise InputError(ds_path, "not an autorubric dataset file (RubricDataset.to_file: no 'items' list)",
                         field="--tool-dataset")
    items = [i if isinstance(i, dict) else {} for i in doc["items"]]
    want = manifest.get("dataset_hash")
    if isinstance(want, str):
        rubric = doc.get("rubric")
        n_criteria = len(rubric) if isinstance(rubric, list) else sum(
            len(i["rubric"]) for i in items if isinstance(i.get("rubric"), list))
        content = json.dumps({"name": doc.get("name"), "prompt": doc.get("prompt"), "num_items": len(items),
                              "num_criteria": n_criteria}, sort_keys=True)
        got = hashlib.sha256(content.encode()).hexdigest()[:16]  # autorubric's own dataset fingerprint
        if got != want:
            raise InputError(ds_path, f"not the dataset this run graded: its fingerprint is {got}, "
                             f"{manifest_path.name} says {want}", field="--tool-dataset")
    return items


def _autorubric_verdict(ref: SampleRef, where: Where, cr: Any) -> RawVerdict:
    cr = _obj(cr, where, "")
    crit = cr.get("criterion") if isinstance(cr.get("criterion"), dict) else cr  # ensemble vs single report
    name, text = _text(crit.get("name")), _text(crit.get("requirement"))
    votes = [v for key in ("votes", "multi_choice_votes") if isinstance(cr.get(key), list)
             for v in cr[key] if isinstance(v, dict)]
    rationale = _text(votes[0].get("reason")) if len(votes) == 1 else _text(cr.get("final_reason", cr.get("reason")))
    error = _text(cr.get("error"))
    if error:
        return RawVerdict(ref, name, where, text=text, unscored=error, rationale=rationale)
    verdict = cr.get("final_verdict", cr.get("verdict"))
    choice = cr.get("final_multi_choice_verdict", cr.get("multi_choice_verdict"))
    if isinstance(verdict, str):
        if verdict in AUTORUBRIC_PASS:
            return RawVerdict(ref, name, where, text=text, passed=AUTORUBRIC_PASS[verdict], rationale=rationale)
        return RawVerdict(ref, name, where, text=text, unscored=f"autorubric verdict {verdict}", rationale=rationale)
    if isinstance(choice, dict):
        if choice.get("na") or not _text(choice.get("selected_label")):
            return RawVerdict(ref, name, where, text=text, unscored="not applicable / cannot assess",
                              rationale=rationale)
        return RawVerdict(ref, name, where, text=text, label=choice["selected_label"], rationale=rationale)
    raise where.error("a criterion report needs a verdict or a multi-choice verdict")


# --------------------------------------------------------------------------- Langfuse / LangSmith


def read_langfuse(path: str | Path) -> ToolFile:
    """Langfuse score exports — the scores API / SDK (``api.scores.get_many()``, camelCase, ``subject``
    or ``traceId``), the UI table export and the blob-storage export (snake_case) as JSON, JSONL or
    CSV — and LangSmith experiment exports (``ExperimentResults.to_pandas()`` rows, CSV/JSON/JSONL,
    with ``feedback.<key>`` columns)."""
    out = ToolFile("langfuse")
    shapes: Counter = Counter()
    for where, row in _records(path):
        if any(k.startswith("feedback.") for k in row):
            shapes["langsmith"] += 1
            _langsmith_row(out, where, row)
        else:
            shapes["langfuse"] += 1
            _langfuse_row(out, where, row)
    if not shapes:
        raise InputError(path, "no scores in the file")
    if len(shapes) > 1:
        raise InputError(path, "mixes Langfuse score rows and LangSmith experiment rows: export one kind")
    out.source = next(iter(shapes))
    return out


def _pick(row: dict, *names: str) -> Any:
    for n in names:
        if n in row and row[n] not in (None, ""):
            return row[n]
    return None


def _json_field(value: Any) -> Any:
    """A nested field: an object as-is, or the JSON text a CSV export writes for it."""
    if isinstance(value, str) and value.strip().startswith(("{", "[")):
        try:
            return json.loads(value, parse_int=_json_int)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to be the object meant
            return value
    return value


def _langfuse_row(out: ToolFile, where: Where, row: dict) -> None:
    name = _pick(row, "name")
    if not isinstance(name, str) or not name.strip():
        raise where.error("a score needs its name (the criterion key)", field="name")
    meta = _json_field(row.get("metadata"))
    meta = meta if isinstance(meta, dict) else {}
    subject = _json_field(row.get("subject"))
    subject = subject if isinstance(subject, dict) else {}
    trace = _pick(row, "traceId", "trace_id") or (subject.get("id") if subject.get("kind") == "trace" else
                                                  subject.get("traceId"))
    explicit = _id_text(meta.get("example_id"))
    ref = SampleRef(where, explicit_id=explicit, explicit_field="metadata.example_id" if explicit else None,
                    candidate_ids=tuple(c for c in (_id_text(trace),) if c), label=explicit or _id_text(trace) or "")
    kind = str(_pick(row, "dataType", "data_type") or "").upper()
    value = _pick(row, "stringValue", "string_value") if kind in ("CATEGORICAL", "TEXT") else None
    if value is None:
        value = row.get("value")
    if kind == "BOOLEAN":
        fields = _langfuse_boolean(value)
    elif isinstance(value, str) and kind in ("NUMERIC", ""):
        fields = _number_or_label(value, numeric=kind == "NUMERIC")
    else:
        fields = _value_of(value)
    out.verdicts.append(RawVerdict(ref, name.strip(), where, rationale=_text(row.get("comment")), **fields))


def _langfuse_boolean(value: Any) -> dict:
    if isinstance(value, bool):
        return {"passed": value}
    word = str(value).strip().lower()
    if word in ("1", "1.0", "true"):
        return {"passed": True}
    if word in ("0", "0.0", "false"):
        return {"passed": False}
    return {"unscored": f"{value!r} is not a boolean"}


def _number_or_label(text: str, *, numeric: bool) -> dict:
    """A CSV cell: a number if it reads as one, else a word (a NUMERIC cell that is not a number is unscored)."""
    try:
        number = float(text)
    except ValueError:
        return {"unscored": f"{text!r} is not a number"} if numeric else {"label": text}
    return _value_of(number)


def _langsmith_row(out: ToolFile, where: Where, row: dict) -> None:
    explicit = _id_text(row.get("inputs.example_id"))
    ref = SampleRef(where, explicit_id=explicit, explicit_field="inputs.example_id" if explicit else None,
                    candidate_ids=tuple(c for c in (_id_text(row.get("example_id")), _id_text(row.get("inputs.id")))
                                        if c),
                    question=_text(row.get("inputs.question")),
                    answer=_text(_pick(row, "outputs.answer", "outputs.output")),
                    label=explicit or _id_text(row.get("example_id")) or "")
    for key, value in row.items():
        if not key.startswith("feedback."):
            continue
        if value in (None, ""):  # the evaluator ran on this row but returned no score
            fields: dict = {"unscored": "no score in the export"}
        else:
            fields = _number_or_label(value, numeric=False) if isinstance(value, str) else _value_of(value)
        cell = Where(where.path, line=where.line, field=key if where.line else f"{where.field}.{key}")
        out.verdicts.append(RawVerdict(ref, key.removeprefix("feedback."), cell, **fields))


__all__ = [
    "TOOLS",
    "RawUsage",
    "RawVerdict",
    "SampleRef",
    "Tool",
    "ToolFile",
    "ToolRun",
    "criterion_value",
    "reads_as_levels",
    "read_autorubric",
    "read_inspect",
    "read_langfuse",
    "read_promptfoo",
    "read_tool_file",
    "resolve",
]
