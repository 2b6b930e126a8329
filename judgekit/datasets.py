"""Parsing and validation of user files — pure: bytes in, validated rows out, nothing written.

Formats (design.md): datasets (JSONL / CSV), rubrics (YAML / JSON), labels (long JSONL/CSV or wide
CSV) and external runs (JSONL / CSV). Every problem raises :class:`InputError`, whose message names the
file, the line (or CSV row) and the field, so a user can fix it in one go. The store writes only
after a whole file has validated, which makes each import all-or-nothing.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from judgekit.rubric import KEY_PATTERN, SCALE_LEVELS, Criterion, KORule, Rubric

MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_FIELD_CHARS = 1_000_000  # one answer/context above this is almost certainly a mistake (and a slow judge)
MAX_CRITERIA = 64
DATASET_FIELDS = ("id", "question", "context", "answer")
TRUE_WORDS = {"true", "pass", "yes", "y", "1", "t", "passed"}
FALSE_WORDS = {"false", "fail", "no", "n", "0", "f", "failed"}
UNSURE_WORDS = {"unsure", "?", "skip", "null", "none"}


class InputError(ValueError):
    """A user file or argument is invalid; ``str()`` is the one line to show."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field, self.reason = str(path), line, field, message
        where = self.path + (f":{line}" if line is not None else "")
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Record:
    """One input record: its position for messages (line number; CSV: the line where the row starts)."""

    line: int
    data: dict[str, Any]


def read_bytes(path: str | Path) -> bytes:
    """A file's bytes after the checks every format shares (exists, size, UTF-16, NUL, empty); a UTF-8
    BOM is removed."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "no such file")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(p, f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")
    raw = p.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(p, "the file is UTF-16; save it as UTF-8", line=1)
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError(p, "contains a NUL byte (binary file?)", line=raw[:nul].count(b"\n") + 1)
    if not raw.strip():
        raise InputError(p, "the file is empty")
    return raw


def read_text(path: str | Path) -> str:
    """Read a file as UTF-8 (a BOM is allowed); invalid bytes are reported with their line."""
    p = Path(path)
    raw = read_bytes(p)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(
            p, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})", line=line
        ) from None


def iter_jsonl(path: str | Path, raw: bytes) -> Iterator[Record]:
    """Records of a JSON-lines file, parsed from bytes line by line (orjson checks UTF-8 as it goes, so
    the whole file is never decoded into one string — the common case of a large import)."""
    offset = 0
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, f"not valid UTF-8 (byte 0x{line[e.start]:02x} at offset {start + e.start})",
                                  line=lineno) from None
            try:
                obj = json.loads(text)  # the standard library's message; it also takes NaN and huge integers
            except json.JSONDecodeError as e:
                raise InputError(path, f"invalid JSON ({e.msg} at column {e.colno})", line=lineno) from None
        if not isinstance(obj, dict):
            raise InputError(path, f"expected a JSON object, got {type(obj).__name__}", line=lineno)
        yield Record(lineno, obj)


def iter_csv(path: str | Path, text: str) -> tuple[list[str], Iterator[Record]]:
    """Header and records of a CSV file; quoted fields may span lines (line = where the row starts)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except csv.Error as e:
        raise InputError(path, f"invalid CSV ({e})", line=1) from None
    header = [h.strip() for h in header]
    seen: set[str] = set()
    for col, h in enumerate(header, start=1):
        if not h:
            raise InputError(path, f"column {col} has an empty header", line=1)
        if h in seen:
            raise InputError(path, "duplicate column", line=1, field=h)
        seen.add(h)

    def records() -> Iterator[Record]:
        start = reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise InputError(path, f"invalid CSV ({e})", line=start) from None
            line, start = start, reader.line_num + 1
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise InputError(path, f"row has {len(row)} fields, the header has {len(header)}", line=line)
            yield Record(line, dict(zip(header, row, strict=True)))

    return header, records()


def read_records(path: str | Path) -> tuple[str, list[str] | None, list[Record]]:
    """(format, CSV header or None, records) of a .jsonl/.json-lines or .csv file."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl", None, list(iter_jsonl(p, read_bytes(p)))
    if suffix in (".csv", ".tsv"):
        header, recs = iter_csv(p, read_text(p))
        return "csv", header, list(recs)
    raise InputError(p, f"unsupported file type {suffix or '(none)'}: use .jsonl or .csv")


def _text_field(path, rec: Record, key: str, *, required: bool) -> str:
    value = rec.data.get(key)
    if value is None or (isinstance(value, str) and not value.strip() and required):
        if required:
            raise InputError(
                path,
                "required and missing" if value is None else "required and empty",
                line=rec.line,
                field=key,
            )
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        if key == "id" and isinstance(value, int):
            return str(value)
        raise InputError(path, f"expected text, got {type(value).__name__}", line=rec.line, field=key)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(path, "not a finite number", line=rec.line, field=key)
    text = str(value)
    if len(text) > MAX_FIELD_CHARS:
        raise InputError(
            path, f"{len(text)} characters; the limit is {MAX_FIELD_CHARS}", line=rec.line, field=key
        )
    return text


# --------------------------------------------------------------------------- datasets


def parse_dataset(path: str | Path) -> list[dict]:
    """Examples of a dataset file: id and answer required; question, context optional; the rest → metadata."""
    fmt, header, records = read_records(path)
    if fmt == "csv":
        missing = [f for f in ("id", "answer") if f not in (header or [])]
        if missing:
            raise InputError(path, "required column missing from the header", line=1, field=missing[0])
    if not records:
        raise InputError(path, "no examples in the file")
    rows: list[dict] = []
    first_line: dict[str, int] = {}
    for rec in records:
        fast = _plain_example(rec.data)
        if fast is not None and fast["id"] not in first_line:
            first_line[fast["id"]] = rec.line
            rows.append(fast)
            continue
        ex_id = _text_field(path, rec, "id", required=True).strip()
        if len(ex_id) > 200:
            raise InputError(path, "longer than 200 characters", line=rec.line, field="id")
        if ex_id in first_line:
            raise InputError(
                path, f"duplicate id {ex_id!r} (first on line {first_line[ex_id]})", line=rec.line, field="id"
            )
        first_line[ex_id] = rec.line
        rows.append(
            {
                "id": ex_id,
                "question": _text_field(path, rec, "question", required=False),
                "context": _text_field(path, rec, "context", required=False),
                "answer": _text_field(path, rec, "answer", required=True),
                "metadata": {k: v for k, v in rec.data.items() if k not in DATASET_FIELDS},
            }
        )
    return rows


def _plain_example(d: dict) -> dict | None:
    """The common case — every field already well-formed text — without per-field checks (import speed).

    Returns None whenever anything needs a closer look; the careful path then produces the message.
    """
    ex_id, answer = d.get("id"), d.get("answer")
    question, context = d.get("question", ""), d.get("context", "")
    if not (type(ex_id) is str and type(answer) is str and type(question) is str and type(context) is str):
        return None
    if not (0 < len(ex_id) <= 200 and ex_id.strip() == ex_id and answer and not answer.isspace()):
        return None
    if max(len(answer), len(question), len(context)) > MAX_FIELD_CHARS:
        return None
    meta = dict(d)
    for f in DATASET_FIELDS:
        meta.pop(f, None)
    return {"id": ex_id, "question": question, "context": context, "answer": answer, "metadata": meta}


# --------------------------------------------------------------------------- rubrics


class _LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers each mapping's line and rejects duplicate keys."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise InputError(
                loader.name, "duplicate key in a mapping", line=key_node.start_mark.line + 1, field=str(key)
            )
        seen[key] = True
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_rubric(path: str | Path) -> Rubric:
    """A rubric file (YAML or JSON), fully validated."""
    p = Path(path)
    text = read_text(p)
    if p.suffix.lower() == ".json":
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(p, f"invalid JSON ({e.msg} at column {e.colno})", line=e.lineno) from None
    elif p.suffix.lower() not in (".yaml", ".yml"):
        raise InputError(p, f"unsupported file type {p.suffix or '(none)'}: use .yaml, .yml or .json")
    return rubric_from_mapping(load_yaml(text, p), p)


def load_yaml(text: str, path: str | Path) -> Any:
    """A YAML (or JSON) document whose mappings carry their ``__line__``; duplicate keys and syntax
    errors are one InputError line naming the file and the line."""
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(
            path, f"invalid YAML ({getattr(e, 'problem', None) or e})", line=mark.line + 1 if mark else None
        ) from None
    finally:
        loader.dispose()


def rubric_from_mapping(doc: Any, path: str | Path = "<rubric>") -> Rubric:
    if not isinstance(doc, Mapping):
        raise InputError(path, "a rubric must be a mapping with 'name' and 'criteria'", line=1)
    top = doc.get("__line__", 1)
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(path, "required: a non-empty text", line=top, field="name")
    items = doc.get("criteria")
    if not isinstance(items, list) or not items:
        raise InputError(path, "required: a non-empty list of criteria", line=top, field="criteria")
    if len(items) > MAX_CRITERIA:
        raise InputError(
            path, f"{len(items)} criteria; the limit is {MAX_CRITERIA}", line=top, field="criteria"
        )
    criteria: list[Criterion] = []
    first: dict[str, int] = {}
    for item in items:
        crit = _criterion(path, item, top)
        line = item.get("__line__", top)
        if crit.key in first:
            raise InputError(
                path,
                f"duplicate criterion key {crit.key!r} (first on line {first[crit.key]})",
                line=line,
                field="key",
            )
        first[crit.key] = line
        criteria.append(crit)
    ko = _ko_rule(path, doc.get("ko_rule"), {c.key: c for c in criteria}, top)
    description = doc.get("description") or ""
    unknown = set(doc) - {"name", "criteria", "ko_rule", "description", "prompt_template", "__line__"}
    if unknown:
        raise InputError(
            path,
            "unknown key (expected name, description, criteria, ko_rule, prompt_template)",
            line=top,
            field=sorted(unknown)[0],
        )
    template = _prompt_template(path, doc.get("prompt_template"), top)
    return Rubric(name=name.strip(), criteria=tuple(criteria), ko_rule=ko, description=str(description),
                  prompt_template=template)


def _prompt_template(path, value: Any, top: int) -> str:
    """A rubric's ``prompt_template``, validated like ``--prompt-template`` (the line is the rubric's)."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise InputError(path, "must be the template text (Jinja2)", line=top, field="prompt_template")
    from judgekit.prompt_templates import compile_template

    try:
        compile_template(value, str(path))
    except InputError as e:
        where = f" (template line {e.line})" if e.line else ""
        raise InputError(path, f"{e.reason}{where}", line=top, field="prompt_template") from None
    return value


def _criterion(path, item: Any, top: int) -> Criterion:
    if not isinstance(item, Mapping):
        raise InputError(
            path, "each criterion must be a mapping with key and question", line=top, field="criteria"
        )
    line = item.get("__line__", top)
    key = item.get("key")
    if not isinstance(key, str) or not KEY_PATTERN.match(key):
        raise InputError(
            path, "must be an identifier: a letter, then letters, digits or _ (≤ 64)", line=line, field="key"
        )
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError(path, f"criterion {key!r} needs a non-empty question", line=line, field="question")
    kind = item.get("kind", "binary")
    if kind not in ("binary", "scale"):
        raise InputError(
            path,
            f"criterion {key!r}: kind must be 'binary' or 'scale', not {kind!r}",
            line=line,
            field="kind",
        )
    unknown = set(item) - {"key", "question", "kind", "levels", "pass_at", "__line__"}
    if unknown:
        raise InputError(path, f"criterion {key!r}: unknown key", line=line, field=sorted(unknown)[0])
    if kind == "binary":
        if "levels" in item or "pass_at" in item:
            field = "levels" if "levels" in item else "pass_at"
            raise InputError(
                path,
                f"criterion {key!r} is binary: {field} only applies to scale criteria",
                line=line,
                field=field,
            )
        return Criterion(key=key, question=question.strip())
    levels = item.get("levels")
    if not isinstance(levels, Mapping) or not levels:
        raise InputError(
            path,
            f"scale criterion {key!r} needs levels 1–5 with a description each",
            line=line,
            field="levels",
        )
    parsed: dict[int, str] = {}
    for k, v in levels.items():
        if k == "__line__":
            continue
        try:
            level = int(k)
        except (TypeError, ValueError):
            level = None
        if level not in SCALE_LEVELS or isinstance(k, bool):
            raise InputError(
                path, f"scale criterion {key!r}: level {k!r} is not one of 1–5", line=line, field="levels"
            )
        if not isinstance(v, str) or not v.strip():
            raise InputError(
                path, f"scale criterion {key!r}: level {level} needs a description", line=line, field="levels"
            )
        parsed[level] = v.strip()
    missing = [lv for lv in SCALE_LEVELS if lv not in parsed]
    if missing:
        raise InputError(
            path, f"scale criterion {key!r}: levels {missing} have no description", line=line, field="levels"
        )
    pass_at = item.get("pass_at", 3)
    if isinstance(pass_at, bool) or not isinstance(pass_at, int) or pass_at not in SCALE_LEVELS:
        raise InputError(
            path, f"scale criterion {key!r}: pass_at must be an integer 1–5", line=line, field="pass_at"
        )
    return Criterion(key=key, question=question.strip(), kind="scale", levels=parsed, pass_at=pass_at)


def _ko_rule(path, raw: Any, by_key: dict[str, Criterion], top: int) -> KORule | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be a mapping {criterion, floor}", line=top, field="ko_rule")
    line = raw.get("__line__", top)
    crit = raw.get("criterion")
    if crit not in by_key:
        raise InputError(
            path, f"K.O. rule names unknown criterion {crit!r}", line=line, field="ko_rule.criterion"
        )
    floor = raw.get("floor")
    valid = by_key[crit].valid_values()
    if isinstance(floor, bool) or not isinstance(floor, int) or floor not in valid or floor == max(valid):
        raise InputError(
            path,
            f"floor must be an integer in {list(valid[:-1])} for {crit!r}",
            line=line,
            field="ko_rule.floor",
        )
    return KORule(criterion=crit, floor=floor)


# --------------------------------------------------------------------------- values


def coerce_value(raw: Any, criterion: Criterion) -> int | None:
    """A label or verdict value as stored: 1/0 for binary, 1–5 for scale, None for unsure/unscored.

    Raises ValueError with a short reason for anything else.
    """
    if raw is None:
        return None
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in UNSURE_WORDS or word == "":
            return None
        if criterion.is_scale:
            try:
                raw = float(word)
            except ValueError:
                raise ValueError(
                    f"expected a score 1–5 for scale criterion {criterion.key!r}, got {raw!r}"
                ) from None
        elif word in TRUE_WORDS:
            return 1
        elif word in FALSE_WORDS:
            return 0
        else:
            raise ValueError(f"expected true/false (or pass/fail) for {criterion.key!r}, got {raw!r}")
    if criterion.is_scale:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not float(raw).is_integer():
            raise ValueError(f"expected an integer score 1–5 for {criterion.key!r}, got {raw!r}")
        if int(raw) not in SCALE_LEVELS:
            raise ValueError(f"score {raw!r} is outside the scale 1–5 of {criterion.key!r}")
        return int(raw)
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, int | float) and raw in (0, 1):
        return int(raw)
    raise ValueError(f"expected true/false for binary criterion {criterion.key!r}, got {raw!r}")


# --------------------------------------------------------------------------- labels


LONG_LABEL_FIELDS = ("example_id", "criterion", "value", "annotator", "note")


def parse_labels(
    path: str | Path,
    *,
    example_ids: set[str],
    criteria: Mapping[str, Criterion],
    annotator: str | None = None,
) -> list[dict]:
    """Labels of a long (JSONL/CSV) or wide (CSV) file, checked against a dataset's ids and the criteria.

    Returns rows ``{example_id (user id), criterion, annotator, value, note}``.
    """
    fmt, header, records = read_records(path)
    if not records:
        raise InputError(path, "no labels in the file")
    if fmt == "csv":
        records = [Record(r.line, {k: _csv_unsafe(v) for k, v in r.data.items()}) for r in records]
    wide = fmt == "csv" and "criterion" not in (header or [])
    if fmt == "csv" and "example_id" not in (header or []):
        raise InputError(path, "required column missing from the header", line=1, field="example_id")
    if wide:
        crit_cols = [h for h in header or [] if h not in ("example_id", "annotator", "note")]
        if not crit_cols:
            raise InputError(path, "a wide label file needs one column per criterion", line=1)
        for col in crit_cols:
            if col not in criteria:
                raise InputError(path, "not a criterion of any rubric", line=1, field=col)
        records = [
            Record(
                rec.line,
                {
                    "example_id": rec.data["example_id"],
                    "criterion": col,
                    "value": rec.data[col],
                    "annotator": rec.data.get("annotator"),
                    "note": rec.data.get("note"),
                    "_wide": True,
                },
            )
            for rec in records
            for col in crit_cols
            if rec.data[col].strip() != ""
        ]
    rows: list[dict] = []
    first: dict[tuple, int] = {}
    for rec in records:
        d = rec.data
        value_field = d["criterion"] if d.get("_wide") else "value"
        ex = _text_field(path, rec, "example_id", required=True).strip()
        if ex not in example_ids:
            raise InputError(path, f"no example {ex!r} in the dataset", line=rec.line, field="example_id")
        crit_key = d.get("criterion")
        if not isinstance(crit_key, str) or crit_key not in criteria:
            raise InputError(path, f"unknown criterion {crit_key!r}", line=rec.line, field="criterion")
        if "value" not in d:
            raise InputError(path, "required and missing", line=rec.line, field="value")
        try:
            value = coerce_value(d["value"], criteria[crit_key])
        except ValueError as e:
            raise InputError(path, str(e), line=rec.line, field=value_field) from None
        who = d.get("annotator") or annotator
        if not isinstance(who, str) or not who.strip():
            raise InputError(
                path, "no annotator: add the field or pass --annotator", line=rec.line, field="annotator"
            )
        note = d.get("note")
        if note is not None and not isinstance(note, str):
            raise InputError(path, f"expected text, got {type(note).__name__}", line=rec.line, field="note")
        unique = (ex, crit_key, who.strip())
        if unique in first:
            raise InputError(
                path,
                f"duplicate label for {ex!r}/{crit_key!r} by {who!r} (first on line {first[unique]})",
                line=rec.line,
                field=value_field,
            )
        first[unique] = rec.line
        rows.append(
            {
                "example_id": ex,
                "criterion": crit_key,
                "annotator": who.strip(),
                "value": value,
                "note": note or None,
            }
        )
    return rows


# --------------------------------------------------------------------------- external runs


def parse_run_file(path: str | Path, *, example_ids: set[str], rubric: Rubric) -> list[dict]:
    """Verdicts produced elsewhere: example_id, criterion, verdict (null = unscored), rationale?, p_pass?"""
    fmt, header, records = read_records(path)
    if fmt == "csv":
        for col in ("example_id", "criterion", "verdict"):
            if col not in (header or []):
                raise InputError(path, "required column missing from the header", line=1, field=col)
    if not records:
        raise InputError(path, "no verdicts in the file")
    keys = {c.key: c for c in rubric.criteria}
    rows: list[dict] = []
    first: dict[tuple, int] = {}
    for rec in records:
        d = rec.data
        ex = _text_field(path, rec, "example_id", required=True).strip()
        if ex not in example_ids:
            raise InputError(path, f"no example {ex!r} in the dataset", line=rec.line, field="example_id")
        crit = d.get("criterion")
        if crit not in keys:
            raise InputError(
                path, f"criterion {crit!r} is not in rubric {rubric.name!r}", line=rec.line, field="criterion"
            )
        if "verdict" not in d:
            raise InputError(path, "required and missing (null for unscored)", line=rec.line, field="verdict")
        try:
            value = coerce_value(d["verdict"], keys[crit])
        except ValueError as e:
            raise InputError(path, str(e), line=rec.line, field="verdict") from None
        p_pass = d.get("p_pass")
        if p_pass in ("", None):
            p_pass = None
        else:
            try:
                p_pass = float(p_pass)
            except (TypeError, ValueError):
                p_pass = math.nan
            if isinstance(d.get("p_pass"), bool) or not 0.0 <= p_pass <= 1.0:
                raise InputError(
                    path,
                    f"must be a probability in [0, 1], got {d.get('p_pass')!r}",
                    line=rec.line,
                    field="p_pass",
                )
        rationale = d.get("rationale")
        if rationale is not None and not isinstance(rationale, str):
            raise InputError(
                path, f"expected text, got {type(rationale).__name__}", line=rec.line, field="rationale"
            )
        if rationale and len(rationale) > MAX_FIELD_CHARS:
            raise InputError(
                path,
                f"{len(rationale)} characters; the limit is {MAX_FIELD_CHARS}",
                line=rec.line,
                field="rationale",
            )
        unique = (ex, crit)
        if unique in first:
            raise InputError(
                path,
                f"duplicate verdict for {ex!r}/{crit!r} (first on line {first[unique]})",
                line=rec.line,
                field="criterion",
            )
        first[unique] = rec.line
        rows.append(
            {
                "example_id": ex,
                "criterion": crit,
                "value": value,
                "rationale": rationale or None,
                "p_pass": p_pass,
            }
        )
    return rows


def dump_labels_csv(rows: list[dict], criteria: list[str]) -> str:
    """Labels in long CSV form; cells that a spreadsheet would execute (=,+,-,@) are neutralised."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(LONG_LABEL_FIELDS)
    for r in rows:
        w.writerow(
            [
                _csv_safe(r["example_id"]),
                r["criterion"],
                _label_text(r["value"], r.get("kind")),
                _csv_safe(r["annotator"]),
                _csv_safe(r.get("note") or ""),
            ]
        )
    return out.getvalue()


def _label_text(value: int | None, kind: str | None) -> str:
    if value is None:
        return "unsure"
    if kind == "binary":
        return "true" if value == 1 else "false"
    return str(value)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_safe(text: str) -> str:
    """Neutralise a cell a spreadsheet would run as a formula (=, +, -, @) with a leading ``'``."""
    text = str(text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _csv_unsafe(text: str) -> str:
    """Undo :func:`_csv_safe` on import, so exported CSV labels round-trip exactly."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_STARTS) else text
