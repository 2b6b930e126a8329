"""Parsing and validation of user files — pure: bytes in, validated rows out, nothing written.

Formats (design.md): datasets (JSONL / CSV), rubrics (YAML / JSON), labels (long JSONL/CSV or wide
CSV) and external runs (JSONL / CSV). Every problem raises :class:`InputError`, whose message names the
file, the line (or CSV row) and the field, so a user can fix it in one go. The store writes only
after a whole file has validated, which makes each import all-or-nothing.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import json.decoder
import json.scanner
import math
import re
import sys
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from judgekit.rubric import KEY_PATTERN, SCALE_LEVELS, Criterion, KORule, Rubric
from judgekit.userfiles import MAX_FILE_BYTES, InputError, read_bytes, read_text  # noqa: F401 - public here too

MAX_FIELD_CHARS = 1_000_000  # one answer/context above this is almost certainly a mistake (and a slow judge)
CSV_FIELD_LIMIT = MAX_FIELD_CHARS  # a CSV cell may be as long as any field (Python's csv default is 128 KiB)
MAX_CRITERIA = 64
MAX_RUBRIC_BYTES = 1024 * 1024  # a rubric of 64 criteria is a few KB; this bounds what YAML can make of it
MAX_DEPTH = 64  # nesting of lists/objects in a record's metadata or a rubric
MAX_YAML_NODES = 100_000  # YAML nodes after expanding aliases (an alias bomb expands to billions)
MAX_ID_CHARS = 200
INT_RANGE = (-(2**63), 2**64 - 1)  # what JSON columns store exactly (orjson, PostgreSQL)
DATASET_FIELDS = ("id", "question", "context", "answer")
TRUE_WORDS = {"true", "pass", "yes", "y", "1", "t", "passed"}
FALSE_WORDS = {"false", "fail", "no", "n", "0", "f", "failed"}
UNSURE_WORDS = {"unsure", "?", "skip", "null", "none"}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Record:
    """One input record: its position for messages (line number; CSV: the line where the row starts)."""

    line: int
    data: dict[str, Any]


def nfc(text: str) -> str:
    """Unicode NFC: ``é`` typed as one code point or as ``e`` + a combining accent is the same id."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def _value_problem(value: Any) -> str | None:
    """Why a parsed JSON/YAML value cannot be stored as it is (else ``None``); see :func:`value_problem_at`."""
    found = value_problem_at(value)
    return found[1] if found else None


def value_problem_at(value: Any, path: str = "") -> tuple[str, str] | None:
    """Where and why a parsed JSON/YAML value cannot be stored as it is (else ``None``): nesting deeper than
    :data:`MAX_DEPTH`, a NUL character or lone surrogate in a string, an integer beyond 64 bits, a key that
    is not text. The place is a path such as ``data[3].comment`` under ``path``. Iterative, so no input can
    exhaust the stack; the path is spelled out only for the value found."""
    Place = tuple | None  # (parent place, key or index): built as it goes, spelled out once
    stack: list[tuple[Any, int, Place]] = [(value, 0, None)]

    def spelled(place: Place) -> str:
        parts: list[str] = []
        while place is not None:
            place, key = place
            parts.append(f"[{key}]" if isinstance(key, int) and not isinstance(key, bool) else f".{key}")
        return (path + "".join(reversed(parts))).lstrip(".")

    while stack:
        item, depth, place = stack.pop()
        problem = None
        if isinstance(item, str):
            if "\x00" in item:
                problem = "contains a NUL character (\\u0000)"
            else:
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    problem = "contains a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text"
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        elif isinstance(item, int):
            if not INT_RANGE[0] <= item <= INT_RANGE[1]:
                problem = "an integer beyond 64 bits (store it as text)"
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                problem = f"nested more than {MAX_DEPTH} levels deep"
            elif isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(k, str | int) or isinstance(k, bool):
                        return spelled(place), f"a mapping key must be text, not {type(k).__name__}"
                    stack.append((k, depth + 1, (place, str(k))))
                    stack.append((v, depth + 1, (place, str(k))))
            else:
                stack.extend((v, depth + 1, (place, i)) for i, v in enumerate(item))
        if problem:
            return spelled(place), problem
    return None


def check_values(path: str | Path, obj: dict, line: int | None) -> None:
    """Refuse a record whose values cannot be stored (see :func:`_value_problem`), naming the field."""
    for key, value in obj.items():
        problem = _value_problem(key) or _value_problem(value)
        if problem:
            raise InputError(path, problem, line=line, field=_field_name(key))


def _field_name(key: Any) -> str:
    text = key if isinstance(key, str) else type(key).__name__
    return repr(text)[1:-1][:60]


def _loads_checked(path: str | Path, text: str, lineno: int) -> Any:
    """``json.loads`` with every way it can fail as one :class:`InputError` (never a traceback)."""
    try:
        return json.loads(text)  # the standard library's message; it also takes NaN and huge integers
    except json.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON ({e.msg} at column {e.colno})", line=lineno) from None
    except RecursionError:
        raise InputError(path, "invalid JSON (nested too deeply)", line=lineno) from None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise InputError(path, f"invalid JSON ({_int_limit_message(e)})", line=lineno) from None


def _int_limit_message(e: Exception) -> str:
    if "digits" in str(e):
        return f"a number with more than {sys.get_int_max_str_digits()} digits"
    return str(e)[:200]


def iter_jsonl(path: str | Path, raw: bytes) -> Iterator[Record]:
    """Records of a JSON-lines file, parsed from bytes line by line (orjson checks UTF-8 as it goes, so
    the whole file is never decoded into one string — the common case of a large import)."""
    offset = 0
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        careful = False
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, f"not valid UTF-8 (byte 0x{line[e.start]:02x} at offset {start + e.start})",
                                  line=lineno) from None
            obj, careful = _loads_checked(path, text, lineno), True
        if not isinstance(obj, dict):
            raise InputError(path, f"expected a JSON object, got {type(obj).__name__}", line=lineno)
        # orjson's values are UTF-8 text and 64-bit integers already; the deep check runs only where the line
        # could hold something else (a \u0000 escape, deep nesting) — a byte count, not a walk, per line
        if careful or b"\\u0000" in line or line.count(b"[") + line.count(b"{") > MAX_DEPTH:
            check_values(path, obj, lineno)
        yield Record(lineno, obj)


def iter_json_array(path: str | Path, text: str) -> Iterator[Record]:
    """Records of a ``.json`` file holding one JSON array of objects, each with the line it starts on."""
    decoder = json.JSONDecoder()
    ws = re.compile(r"[ \t\n\r]*")
    pos, line = ws.match(text, text.index("[") + 1).end(), 1 + text.count("\n", 0, text.index("["))
    counted = 0
    if text.startswith("]", pos):
        return
    while True:
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(path, f"invalid JSON ({e.msg} at column {e.colno})", line=e.lineno) from None
        except (RecursionError, ValueError) as e:
            reason = "nested too deeply" if isinstance(e, RecursionError) else _int_limit_message(e)
            raise InputError(path, f"invalid JSON ({reason})", line=line) from None
        if not isinstance(obj, dict):
            raise InputError(path, f"expected a JSON object, got {type(obj).__name__}", line=line)
        check_values(path, obj, line)
        yield Record(line, obj)
        pos = ws.match(text, end).end()
        if text.startswith("]", pos):
            if text[pos + 1 :].strip():
                raise InputError(path, "text after the end of the JSON array",
                                 line=1 + text.count("\n", 0, pos))
            return
        if not text.startswith(",", pos):
            raise InputError(path, "invalid JSON (expected ',' or ']' between array items)",
                             line=1 + text.count("\n", 0, pos))
        pos = ws.match(text, pos + 1).end()


def iter_csv(path: str | Path, text: str) -> tuple[list[str], Iterator[Record]]:
    """Header and records of a CSV file; quoted fields may span lines (line = where the row starts)."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except csv.Error as e:
        raise InputError(path, _csv_message(e), line=1) from None
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
                raise InputError(path, _csv_message(e), line=start) from None
            line, start = start, reader.line_num + 1
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise InputError(path, f"row has {len(row)} fields, the header has {len(header)}", line=line)
            yield Record(line, dict(zip(header, row, strict=True)))

    return header, records()


def _csv_message(e: csv.Error) -> str:
    if "field limit" in str(e):
        return f"a field is longer than {CSV_FIELD_LIMIT} characters (the limit)"
    return f"invalid CSV ({e})"


def read_records(path: str | Path) -> tuple[str, list[str] | None, list[Record]]:
    """(format, CSV header or None, records) of a .jsonl/.json-lines or .csv file; a ``.json`` file that holds
    one JSON array of objects is read as that array."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        raw = read_bytes(p)
        if suffix == ".json" and raw.lstrip().startswith(b"["):
            return "jsonl", None, list(iter_json_array(p, read_text(p)))
        return "jsonl", None, list(iter_jsonl(p, raw))
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
    if key in ("id", "example_id"):
        text = nfc(text)
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
        if len(ex_id) > MAX_ID_CHARS:
            raise InputError(path, f"longer than {MAX_ID_CHARS} characters", line=rec.line, field="id")
        if ex_id in first_line:
            same_text = rec.data.get("id") == next(r["id"] for r in rows if r["id"] == ex_id)
            how = "" if same_text else "; the same id once Unicode-normalised (NFC)"
            raise InputError(
                path, f"duplicate id {ex_id!r} (first on line {first_line[ex_id]}{how})", line=rec.line, field="id"
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
    if not (0 < len(ex_id) <= MAX_ID_CHARS and ex_id.strip() == ex_id and answer and not answer.isspace()):
        return None
    if not unicodedata.is_normalized("NFC", ex_id):
        return None
    if max(len(answer), len(question), len(context)) > MAX_FIELD_CHARS:
        return None
    meta = dict(d)
    for f in DATASET_FIELDS:
        meta.pop(f, None)
    return {"id": ex_id, "question": question, "context": context, "answer": answer, "metadata": meta}


# --------------------------------------------------------------------------- rubrics


class _LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers each mapping's line and rejects duplicate and non-text keys."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise InputError(
                loader.name, f"a mapping key must be text, not {type(key).__name__}", line=line
            )
        if key in seen:
            raise InputError(loader.name, "duplicate key in a mapping", line=line, field=str(key)[:60])
        seen[key] = True
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expanded_size(root: yaml.Node, path: Path) -> int:
    """How many nodes the document has once every alias is expanded — computed on the node graph (each shared
    node counted once per use, memoised), so an alias bomb is measured, never built. Iterative."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if done:
            on_path.discard(id(node))
            sizes[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if id(node) in on_path:
            raise InputError(path, "a YAML alias refers to a node that contains it", line=node.start_mark.line + 1)
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
        if len(on_path) > MAX_DEPTH * 2:
            raise InputError(path, f"nested more than {MAX_DEPTH} levels deep", line=node.start_mark.line + 1)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str, path: str | Path) -> Any:
    """A YAML (or JSON) document whose mappings carry their ``__line__``; duplicate and non-text keys, syntax
    errors, deep nesting, huge numbers and alias bombs (measured on the node graph, refused unexpanded) are
    one InputError line naming the file and the line."""
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, Path(path)) > MAX_YAML_NODES:
            raise InputError(
                path, f"YAML aliases expand to more than {MAX_YAML_NODES} values (an alias bomb?); refused unread"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(
            path, f"invalid YAML ({getattr(e, 'problem', None) or e})", line=mark.line + 1 if mark else None
        ) from None
    except RecursionError:
        raise InputError(path, "invalid YAML (nested too deeply)") from None
    except (ValueError, OverflowError) as e:  # InputError is a ValueError: let it through as it is
        if isinstance(e, InputError):
            raise
        raise InputError(path, f"invalid YAML value ({_int_limit_message(e)})") from None
    finally:
        loader.dispose()


def _parse_json_rubric(p: Path, text: str) -> Any:
    """A JSON rubric parsed as JSON (tabs, ``\\uD83D\\uDE00`` surrogate pairs and all), each object carrying
    ``__line__`` like the YAML loader's and duplicate keys refused — so a ``.json`` file is never read as
    YAML. Objects are built through the pure-Python scanner to learn where each one starts."""
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(newlines, pos - 1) + 1

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None, _w=None):
        _, end = s_and_end
        start = end - 1
        pairs, end = json.decoder.JSONObject(s_and_end, strict, scan_once, None, list, memo)
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise InputError(p, "duplicate key in a mapping", line=line_of(start), field=key[:60])
            out[key] = value
        out["__line__"] = line_of(start)
        return out, end

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        raise InputError(p, f"invalid JSON ({e.msg} at column {e.colno})", line=e.lineno) from None
    except RecursionError:
        raise InputError(p, "invalid JSON (nested too deeply)") from None
    except ValueError as e:
        if isinstance(e, InputError):
            raise
        raise InputError(p, f"invalid JSON ({_int_limit_message(e)})") from None


def parse_rubric(path: str | Path) -> Rubric:
    """A rubric file (YAML or JSON — a ``.json`` file is parsed as JSON), fully validated."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise InputError(p, f"unsupported file type {p.suffix or '(none)'}: use .yaml, .yml or .json")
    if p.is_file() and p.stat().st_size > MAX_RUBRIC_BYTES:
        raise InputError(p, f"file is {p.stat().st_size} bytes; a rubric may have at most {MAX_RUBRIC_BYTES}")
    text = read_text(p)
    doc = _parse_json_rubric(p, text) if suffix == ".json" else load_yaml(text, p)
    problem = _value_problem(doc)
    if problem:
        raise InputError(p, problem)
    return rubric_from_mapping(doc, p)


def rubric_from_mapping(doc: Any, path: str | Path = "<rubric>") -> Rubric:
    if not isinstance(doc, Mapping):
        raise InputError(path, "a rubric must be a mapping with 'name' and 'criteria'", line=1)
    top = doc.get("__line__", 1)
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(path, "required: a non-empty text", line=top, field="name")
    name = nfc(name.strip())
    if len(name) > MAX_ID_CHARS:
        raise InputError(path, f"{len(name)} characters; the limit is {MAX_ID_CHARS}", line=top, field="name")
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
    by_key = {c.key: c for c in criteria}
    ko = _ko_rule(path, doc.get("ko_rule"), by_key, top)
    bundle_ko = _bundle_ko_rules(path, doc.get("bundle_ko_rules"), by_key, top)
    description = doc.get("description") or ""
    if not isinstance(description, str):
        raise InputError(path, f"expected text, got {type(description).__name__}", line=top, field="description")
    unknown = set(doc) - {"name", "criteria", "ko_rule", "bundle_ko_rules", "description", "prompt_template",
                          "__line__"}
    if unknown:
        raise InputError(
            path,
            "unknown key (expected name, description, criteria, ko_rule, bundle_ko_rules, prompt_template)",
            line=top,
            field=sorted(unknown)[0],
        )
    template = _prompt_template(path, doc.get("prompt_template"), top)
    return Rubric(name=name, criteria=tuple(criteria), ko_rule=ko, description=description,
                  prompt_template=template, bundle_ko_rules=bundle_ko)


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
    unknown = set(item) - {"key", "question", "kind", "levels", "pass_at", "cannot_assess", "__line__"}
    if unknown:
        raise InputError(path, f"criterion {key!r}: unknown key", line=line, field=sorted(unknown)[0])
    cannot_assess = item.get("cannot_assess", False)
    if not isinstance(cannot_assess, bool):
        raise InputError(
            path, f"criterion {key!r}: cannot_assess must be true or false", line=line, field="cannot_assess"
        )
    if kind == "binary":
        if "levels" in item or "pass_at" in item:
            field = "levels" if "levels" in item else "pass_at"
            raise InputError(
                path,
                f"criterion {key!r} is binary: {field} only applies to scale criteria",
                line=line,
                field=field,
            )
        return Criterion(key=key, question=question.strip(), cannot_assess=cannot_assess)
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
    return Criterion(key=key, question=question.strip(), kind="scale", levels=parsed, pass_at=pass_at,
                     cannot_assess=cannot_assess)


def _ko_rule(path, raw: Any, by_key: dict[str, Criterion], top: int, where: str = "ko_rule") -> KORule | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be a mapping {criterion, floor}", line=top, field=where)
    line = raw.get("__line__", top)
    unknown = set(raw) - {"criterion", "floor", "__line__"}
    if unknown and where != "ko_rule":  # (the rubric-wide rule has always tolerated extra keys)
        raise InputError(path, "unknown key (expected criterion, floor)", line=line,
                         field=f"{where}.{sorted(unknown, key=str)[0]}")
    crit = raw.get("criterion")
    if crit not in by_key:
        raise InputError(
            path, f"K.O. rule names unknown criterion {crit!r}", line=line, field=f"{where}.criterion"
        )
    floor = raw.get("floor")
    valid = by_key[crit].valid_values()
    if isinstance(floor, bool) or not isinstance(floor, int) or floor not in valid or floor == max(valid):
        raise InputError(
            path,
            f"floor must be an integer in {list(valid[:-1])} for {crit!r}",
            line=line,
            field=f"{where}.floor",
        )
    return KORule(criterion=crit, floor=floor)


def _bundle_ko_rules(path, raw: Any, by_key: dict[str, Criterion], top: int) -> dict[str, dict[str, KORule]]:
    """``bundle_ko_rules: {FIELD: {VALUE: {criterion, floor}}}`` — the K.O. rule of the bundles whose
    metadata FIELD has VALUE (values are compared as text, as bundles group them)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be a mapping {metadata field: {value: {criterion, floor}}}", line=top,
                         field="bundle_ko_rules")
    out: dict[str, dict[str, KORule]] = {}
    for fld, values in raw.items():
        if fld == "__line__":
            continue
        line = raw.get("__line__", top)
        if not isinstance(values, Mapping) or not set(values) - {"__line__"}:
            raise InputError(path, "must map metadata values to {criterion, floor}", line=line,
                             field=f"bundle_ko_rules.{fld}")
        rules: dict[str, KORule] = {}
        for value, rule in values.items():
            if value == "__line__":
                continue
            where = f"bundle_ko_rules.{fld}.{value}"
            parsed = _ko_rule(path, rule, by_key, values.get("__line__", line), where)
            if parsed is None:
                raise InputError(path, "must be a mapping {criterion, floor}", line=values.get("__line__", line),
                                 field=where)
            named = bundle_value(value)
            if named is None:
                raise InputError(path, "a blank value names no bundle", line=values.get("__line__", line), field=where)
            rules[named] = parsed
        out[str(fld)] = rules
    return out


def bundle_value(value: Any) -> str | None:
    """A metadata value as bundles compare and show it: text in NFC without surrounding space (``"café"``
    typed either way is one bundle), anything else as compact JSON; ``None`` for a value that names no
    bundle (missing, or blank text)."""
    if value is None:
        return None
    if isinstance(value, str):
        return nfc(value.strip()) or None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


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
    refused: Mapping[str, str] | None = None,
) -> list[dict]:
    """Labels of a long (JSONL/CSV) or wide (CSV) file, checked against a dataset's ids and the criteria
    (``refused``: criterion keys that may not be labelled → why).

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
        if isinstance(crit_key, str) and refused and crit_key in refused:
            raise InputError(path, refused[crit_key], line=rec.line, field="criterion")
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
        who = nfc(who.strip())
        if len(who) > MAX_ID_CHARS:
            raise InputError(path, f"longer than {MAX_ID_CHARS} characters", line=rec.line, field="annotator")
        note = d.get("note")
        if note is not None and not isinstance(note, str):
            raise InputError(path, f"expected text, got {type(note).__name__}", line=rec.line, field="note")
        unique = (ex, crit_key, who)
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
                "annotator": who,
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
    """Labels in long CSV form; cells that a spreadsheet would execute (=,+,-,@) are neutralised with a
    leading ``'`` — and so is a cell that starts with ``'`` itself, so :func:`_csv_unsafe` can undo exactly
    what was added and every value reads back as it was. Lines end in CRLF (RFC 4180), which also makes the
    writer quote a value holding a lone CR — with LF endings it did not, and the reader split the row there."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(LONG_LABEL_FIELDS)
    for r in rows:
        w.writerow(
            [
                _csv_safe(r["example_id"]),
                r["criterion"],
                label_text(r["value"], r.get("kind")),
                _csv_safe(r["annotator"]),
                _csv_safe(r.get("note") or ""),
            ]
        )
    return out.getvalue()


def label_text(value: int | None, kind: str | None) -> str:
    """A stored label value as export text: true/false only when the criterion is binary everywhere and the
    value is 1/0; the number itself otherwise (a key that is binary in one rubric and a scale in another is
    exported as its stored number, which reads back exactly under either definition)."""
    if value is None:
        return "unsure"
    if kind == "binary" and value in (0, 1):
        return "true" if value == 1 else "false"
    return str(value)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_ESCAPED_STARTS = (*FORMULA_STARTS, "'")


def _csv_safe(text: str) -> str:
    """Neutralise a cell a spreadsheet would run as a formula (=, +, -, @) with a leading ``'``; a cell that
    already starts with ``'`` gets one too, so that the escape is never ambiguous."""
    text = str(text)
    return "'" + text if text.startswith(_ESCAPED_STARTS) else text


def _csv_unsafe(text: str) -> str:
    """Undo :func:`_csv_safe` on import, so exported CSV labels round-trip exactly (a lone leading ``'``
    before anything else — a spreadsheet's own text marker — is kept)."""
    return text[1:] if text.startswith("'") and text[1:].startswith(_ESCAPED_STARTS) else text
