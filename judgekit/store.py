"""The store: SQLAlchemy 2.0 models and repository functions.

Every other module reaches the database through here. Functions take a ``Session`` and never commit on
their own unless their name says so — the caller (a CLI command, a page, the runner) owns the
transaction (``with Session(engine) as s, s.begin(): ...``). Imports use Core bulk inserts.

Schema changes go through the Alembic migrations in ``db/migrations``; ``engine_for`` applies them on
first use, so a fresh SQLite file is ready without an explicit ``judgekit init``.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    case,
    create_engine,
    delete,
    event,
    false,
    func,
    insert,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from judgekit import config, matrix_cache, redact
from judgekit.rubric import Criterion, KORule, Rubric


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Dataset(Base):
    __tablename__ = "datasets"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Example(Base):
    __tablename__ = "examples"
    __table_args__ = (UniqueConstraint("dataset_id", "ext_id", name="uq_examples_dataset_ext_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    ext_id: Mapped[str] = mapped_column(String(200))
    question: Mapped[str] = mapped_column(Text, default="")
    context: Mapped[str] = mapped_column(Text, default="")
    answer: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)


class RubricRow(Base):
    __tablename__ = "rubrics"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    ko_criterion: Mapped[str | None] = mapped_column(String(64))
    ko_floor: Mapped[int | None] = mapped_column(Integer)
    # {field: {value: {criterion, floor}}}: K.O. rules of bundles (Rubric.bundle_ko_rules); NULL = none
    bundle_ko_rules: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    prompt_template: Mapped[str | None] = mapped_column(Text)


class CriterionRow(Base):
    __tablename__ = "criteria"
    __table_args__ = (UniqueConstraint("rubric_id", "key", name="uq_criteria_rubric_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    rubric_id: Mapped[int] = mapped_column(ForeignKey("rubrics.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(64))
    question: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))
    levels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    pass_at: Mapped[int | None] = mapped_column(Integer)
    cannot_assess: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class Judge(Base):
    __tablename__ = "judges"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))  # openai | simulated | local | imported
    base_url: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(200))
    api_key_env: Mapped[str | None] = mapped_column(String(200))  # the variable's *name*, never a key
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timeout_s: Mapped[float | None] = mapped_column(Float)
    max_tokens: Mapped[int | None] = mapped_column(Integer)
    suppress_thinking: Mapped[bool] = mapped_column(Boolean, default=False)


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    rubric_id: Mapped[int] = mapped_column(ForeignKey("rubrics.id", ondelete="CASCADE"), index=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id"))
    harness: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    sample: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    totals: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    batch: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # OpenAI Batch API state (ids, status)
    # `judgekit run --repeat N`: the N runs share a group name and know their place in it
    repeat_group: Mapped[str | None] = mapped_column(String(200), index=True)
    repeat_index: Mapped[int | None] = mapped_column(Integer)
    use_cache: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())  # --no-cache: False


class RunExample(Base):
    """The examples a run covers (its sample), in the order the runner sends them."""

    __tablename__ = "run_examples"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class Bundle(Base):
    """Answers of a dataset that share their values of one or more metadata fields (seed 002: the answers
    one model gave to one pack of prompts). ``fields`` is the JSON text of the field names, in order
    (``["model", "pack"]``), ``key_values`` the members' values of those fields as text; ``key_hash``
    (sha256 of both) keeps one row per (dataset, fields, values) whatever their length."""

    __tablename__ = "bundles"
    __table_args__ = (UniqueConstraint("dataset_id", "key_hash", name="uq_bundles_dataset_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    fields: Mapped[str] = mapped_column(Text)
    key_values: Mapped[list[Any]] = mapped_column(JSON, default=list)
    label: Mapped[str] = mapped_column(Text)
    key_hash: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class BundleExample(Base):
    """The answers of a bundle, in dataset order."""

    __tablename__ = "bundle_examples"
    bundle_id: Mapped[int] = mapped_column(ForeignKey("bundles.id", ondelete="CASCADE"), primary_key=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class RunBundle(Base):
    """The bundles a bundle-level run covers, with the K.O. rule each was judged under (from the rubric)."""

    __tablename__ = "run_bundles"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    bundle_id: Mapped[int] = mapped_column(ForeignKey("bundles.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    ko_criterion: Mapped[str | None] = mapped_column(String(64))
    ko_floor: Mapped[int | None] = mapped_column(Integer)


class Call(Base):
    __tablename__ = "calls"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    # a call is about one example (per-answer runs) or one bundle (bundle-level runs)
    example_id: Mapped[int | None] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"))
    bundle_id: Mapped[int | None] = mapped_column(ForeignKey("bundles.id", ondelete="CASCADE"))
    criteria: Mapped[list[Any]] = mapped_column(JSON, default=list)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    latency_s: Mapped[float | None] = mapped_column(Float)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))  # ok | error
    error: Mapped[str | None] = mapped_column(Text)
    structured_mode: Mapped[str | None] = mapped_column(String(16))
    request: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    response_text: Mapped[str | None] = mapped_column(Text)  # bounded: head and tail (rawtext.reply_columns)
    response_chars: Mapped[int | None] = mapped_column(Integer)  # the whole reply's length …
    response_sha256: Mapped[str | None] = mapped_column(String(64))  # … and hash
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    from_cache: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # nothing sent


class Verdict(Base):
    __tablename__ = "verdicts"
    __table_args__ = (
        UniqueConstraint("run_id", "example_id", "criterion_id", name="uq_verdicts_run_ex_crit"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"))
    criterion_id: Mapped[int] = mapped_column(ForeignKey("criteria.id", ondelete="CASCADE"))
    value: Mapped[int | None] = mapped_column(Integer)  # NULL = unscored
    rationale: Mapped[str | None] = mapped_column(Text)
    p_pass: Mapped[float | None] = mapped_column(Float)
    red_flags: Mapped[list[Any]] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text)
    call_id: Mapped[int | None] = mapped_column(ForeignKey("calls.id", ondelete="SET NULL"))
    # the judge answered "cannot assess" (value NULL): its own outcome, not unscored, not a fail
    cannot_assess: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class ResponseCache(Base):
    """A temperature-0 reply, content-addressed by endpoint, model and request body (see response_cache.py)."""

    __tablename__ = "response_cache"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    base_url: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    reply: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class BundleVerdict(Base):
    """A bundle-level verdict: run, bundle, criterion → value (NULL = unscored), rationale, red flags."""

    __tablename__ = "bundle_verdicts"
    __table_args__ = (
        UniqueConstraint("run_id", "bundle_id", "criterion_id", name="uq_bundle_verdicts_run_bundle_crit"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    bundle_id: Mapped[int] = mapped_column(ForeignKey("bundles.id", ondelete="CASCADE"))
    criterion_id: Mapped[int] = mapped_column(ForeignKey("criteria.id", ondelete="CASCADE"))
    value: Mapped[int | None] = mapped_column(Integer)
    rationale: Mapped[str | None] = mapped_column(Text)
    red_flags: Mapped[list[Any]] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text)
    call_id: Mapped[int | None] = mapped_column(ForeignKey("calls.id", ondelete="SET NULL"))


class Annotator(Base):
    """A person (or the demo's ``reference`` truth). An ``adjudicator``'s label settles the consensus."""

    __tablename__ = "annotators"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(16), default="annotator", server_default="annotator")


class Label(Base):
    """One annotator's judgement of one criterion on one example. ``value`` NULL = unsure."""

    __tablename__ = "labels"
    __table_args__ = (
        UniqueConstraint("example_id", "criterion", "annotator_id", name="uq_labels_ex_crit_annotator"),
        Index("ix_labels_criterion", "criterion", "example_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), index=True)
    criterion: Mapped[str] = mapped_column(String(64))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id", ondelete="CASCADE"))
    value: Mapped[int | None] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow, index=True)


class LabelSet(Base):
    __tablename__ = "label_sets"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    rubric_id: Mapped[int] = mapped_column(ForeignKey("rubrics.id", ondelete="CASCADE"))
    strategy: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class LabelSetItem(Base):
    __tablename__ = "label_set_items"
    label_set_id: Mapped[int] = mapped_column(
        ForeignKey("label_sets.id", ondelete="CASCADE"), primary_key=True
    )
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class RunLease(Base):
    """Which process is executing a run (see :mod:`judgekit.lease`); at most one row per run."""

    __tablename__ = "run_leases"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int | None] = mapped_column(Integer)
    acquired_at: Mapped[dt.datetime] = mapped_column(DateTime)
    heartbeat_at: Mapped[dt.datetime] = mapped_column(DateTime)


class DatabaseIdentity(Base):
    """One row: an id written when the schema is created, so caches can tell a recreated database from the
    one that was at the same URL before (:func:`database_identity`)."""

    __tablename__ = "database_identity"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


# --------------------------------------------------------------------------- names

NAME_LIMITS = {"dataset": 200, "rubric": 200, "run": 200, "judge": 200, "model": 200, "annotator": 200,
               "label set": 200, "criterion key": 64, "example id": 200, "key variable name": 200}


def check_name(what: str, value: str | None) -> str | None:
    """``value`` if it fits its column; else ValueError naming what is too long (the same refusal on SQLite,
    which would store it, and PostgreSQL, which would raise a driver error)."""
    limit = NAME_LIMITS[what]
    if value is not None and len(value) > limit:
        raise ValueError(f"the {what} name is {len(value)} characters; the limit is {limit}")
    if value is not None and "\x00" in value:
        raise ValueError(f"the {what} name contains a NUL character")
    return value


def check_new_name(s: Session, model: type, what: str, name: str) -> None:
    """Refuse a name too long for its column, or already taken by another row of ``model`` (a dataset,
    rubric, run or label set): one ValueError naming ``what``."""
    check_name(what, name)
    if s.scalar(select(model.id).where(model.name == name)) is not None:
        raise ValueError(f"a {what} named {name!r} already exists")


def _named(s: Session, model: type, name: str, missing: str) -> Any:
    row = s.scalar(select(model).where(model.name == name))
    if row is None:
        raise NotFound(missing)
    return row


# --------------------------------------------------------------------------- engine


class NotFound(LookupError):
    """A named dataset / rubric / run does not exist."""


_engines: dict[str, Engine] = {}
_engine_files: dict[str, tuple[int, int] | None] = {}  # URL → (device, inode) of its SQLite file
_engines_lock = threading.Lock()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _json_dumps(obj: Any) -> str:
    """JSON columns (metadata, call requests) through orjson: several times faster than json.dumps."""
    return orjson.dumps(obj).decode()


def make_engine(url: str) -> Engine:
    """A new engine; SQLite connections get WAL, a 30 s busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        _ensure_sqlite_dir(url)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                               json_serializer=_json_dumps)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, json_serializer=_json_dumps)


def _ensure_sqlite_dir(url: str) -> None:
    from sqlalchemy.engine import make_url

    db = make_url(url).database
    if db and db != ":memory:":
        from pathlib import Path

        Path(db).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)


def _sqlite_file(url: str) -> tuple[int, int] | None:
    """(device, inode) of a SQLite URL's file, ``None`` when it is not a file (or not there yet)."""
    if not url.startswith("sqlite"):
        return None
    from pathlib import Path

    from sqlalchemy.engine import make_url

    db = make_url(url).database
    if not db or db == ":memory:":
        return None
    try:
        st = Path(db).expanduser().stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def engine_for(url: str | None = None, *, migrate: bool = True) -> Engine:
    """The process-wide engine for a URL (default: :func:`judgekit.config.db_url`), migrated on first use.

    A SQLite file deleted and recreated at the same path gets a new engine: the old one's pooled
    connections would go on reading the deleted file.
    """
    url = config.db_url(url)
    with _engines_lock:
        engine = _engines.get(url)
        if engine is not None and url.startswith("sqlite") and _sqlite_file(url) != _engine_files.get(url):
            engine.dispose()
            engine = None
        if engine is None:
            engine = make_engine(url)
            if migrate:
                upgrade(engine)
            _engines[url] = engine
            _engine_files[url] = _sqlite_file(url)
        return engine


def dispose_engines() -> None:
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _engine_files.clear()


def database_identity(s: Session) -> str:
    """The id written into this database when its schema was created (migration 0005): part of every cache
    key, so a database deleted and recreated at the same URL never shows the old one's numbers."""
    return s.scalar(select(DatabaseIdentity.id)) or ""


def _alembic_config(engine: Engine):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(config.MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(config.MIGRATIONS_DIR)).get_current_head()


_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)


def _file_heads() -> list[str]:
    """Revisions no migration file builds on, read from the files' ``revision`` / ``down_revision`` lines."""
    revisions, parents = set(), set()
    for path in (config.MIGRATIONS_DIR / "versions").glob("*.py"):
        for key, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            (revisions if key == "revision" else parents).add(value)
    return sorted(revisions - parents)


def up_to_date(engine: Engine) -> bool:
    """Whether the database is at the newest migration — one small query, without importing alembic
    (which costs a noticeable part of every command's start-up); False whenever in doubt."""
    from sqlalchemy import exc, text

    heads = _file_heads()
    if len(heads) != 1:
        return False
    try:
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except exc.SQLAlchemyError:
        return False
    return stored == heads


def upgrade(engine: Engine, revision: str = "head") -> bool:
    """Apply pending migrations; returns whether anything was applied (a second call is a no-op)."""
    if revision == "head" and up_to_date(engine):
        return False
    from alembic import command

    before = current_revision(engine)
    target = head_revision() if revision == "head" else revision
    if before == target:
        return False
    command.upgrade(_alembic_config(engine), revision)
    return True


# --------------------------------------------------------------------------- datasets


def get_dataset(s: Session, name: str) -> Dataset:
    return _named(s, Dataset, name, f"no dataset named {name!r} (see `judgekit import-dataset` or `judgekit demo`)")


def insert_dataset(s: Session, name: str, rows: Sequence[dict], source: str | None = None) -> Dataset:
    """Create a dataset and bulk-insert its examples (rows: id, question, context, answer, metadata)."""
    check_new_name(s, Dataset, "dataset", name)
    ds = Dataset(name=name, source=source)
    s.add(ds)
    s.flush()
    values = [
        (ds.id, r["id"], r.get("question") or "", r.get("context") or "", r["answer"], r.get("metadata") or {})
        for r in rows
    ]
    conn = s.connection()
    if conn.dialect.name == "sqlite":
        # the driver's executemany, metadata serialised here: skips SQLAlchemy's per-row parameter
        # processing, a sixth of a 100k-row import (bench/import_bench.py)
        conn.exec_driver_sql(_INSERT_EXAMPLES_SQLITE, [(*v[:5], _json_dumps(v[5])) for v in values])
        return ds
    names = ("dataset_id", "ext_id", "question", "context", "answer", "metadata")
    payload = [dict(zip(names, v, strict=True)) for v in values]
    for chunk in _chunks(payload, 5000):  # Core executemany (the ORM bulk path costs ~3× more per row)
        conn.execute(Example.__table__.insert(), chunk)
    return ds


_INSERT_EXAMPLES_SQLITE = (
    "INSERT INTO examples (dataset_id, ext_id, question, context, answer, metadata) VALUES (?, ?, ?, ?, ?, ?)"
)


def _chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def example_ids(s: Session, dataset_id: int) -> dict[str, int]:
    """User id → internal id for every example of a dataset."""
    rows = s.execute(select(Example.ext_id, Example.id).where(Example.dataset_id == dataset_id))
    return {ext: iid for ext, iid in rows}


def search_examples(s: Session, dataset_id: int, text: str) -> list[int]:
    """Internal ids (ascending) of the dataset's examples whose id, question, context or answer contains
    ``text`` (case-insensitive; ``%`` and ``_`` match themselves)."""
    cols = (Example.ext_id, Example.question, Example.context, Example.answer)
    hit = or_(*(c.icontains(text, autoescape=True) for c in cols))
    return list(s.scalars(select(Example.id).where(Example.dataset_id == dataset_id, hit).order_by(Example.id)))


def example_texts(s: Session, dataset_id: int, ext_ids: Sequence[str] | None = None) -> dict[str, tuple[str, str, str]]:
    """User id → (question, context, answer) of a dataset's examples — the given ones, or all when
    ``ext_ids`` is None ("" for a missing text). The grid shows them; an imported tool file is matched on them."""
    cols = select(Example.ext_id, Example.question, Example.context, Example.answer)
    if ext_ids is None:
        chunks = [cols.where(Example.dataset_id == dataset_id)]
    else:
        chunks = [cols.where(Example.dataset_id == dataset_id, Example.ext_id.in_(chunk))
                  for chunk in _chunks(list(ext_ids), 500)]
    return {e: (q or "", c or "", a or "") for query in chunks for e, q, c, a in s.execute(query)}


def list_datasets(s: Session) -> list[dict]:
    n = select(Example.dataset_id, func.count().label("n")).group_by(Example.dataset_id).subquery()
    rows = s.execute(
        select(Dataset.id, Dataset.name, Dataset.created_at, func.coalesce(n.c.n, 0))
        .outerjoin(n, n.c.dataset_id == Dataset.id)
        .order_by(Dataset.name)
    )
    return [{"id": i, "name": nm, "examples": cnt, "created_at": c} for i, nm, c, cnt in rows]


# --------------------------------------------------------------------------- rubrics


def save_rubric(s: Session, rubric: Rubric) -> RubricRow:
    for c in rubric.criteria:
        check_name("criterion key", c.key)
    check_new_name(s, RubricRow, "rubric", rubric.name)
    row = RubricRow(
        name=rubric.name,
        description=rubric.description,
        ko_criterion=rubric.ko_rule.criterion if rubric.ko_rule else None,
        ko_floor=rubric.ko_rule.floor if rubric.ko_rule else None,
        prompt_template=rubric.prompt_template or None,
        bundle_ko_rules=rubric.to_dict().get("bundle_ko_rules"),
    )
    s.add(row)
    s.flush()
    s.execute(
        insert(CriterionRow),
        [
            {
                "rubric_id": row.id,
                "position": i,
                "key": c.key,
                "question": c.question,
                "kind": c.kind,
                "levels": {str(k): v for k, v in c.levels.items()},
                "pass_at": c.pass_at,
                "cannot_assess": c.cannot_assess,
            }
            for i, c in enumerate(rubric.criteria)
        ],
    )
    return row


def get_rubric_row(s: Session, name: str) -> RubricRow:
    return _named(s, RubricRow, name, f"no rubric named {name!r} (see `judgekit import-rubric`)")


def criterion_rows(s: Session, rubric_id: int) -> list[CriterionRow]:
    return list(
        s.scalars(
            select(CriterionRow).where(CriterionRow.rubric_id == rubric_id).order_by(CriterionRow.position)
        )
    )


def rubric_value(s: Session, row: RubricRow) -> Rubric:
    crits = tuple(
        Criterion(
            key=c.key,
            question=c.question,
            kind=c.kind,  # type: ignore[arg-type]
            levels={int(k): v for k, v in (c.levels or {}).items()},
            pass_at=c.pass_at,
            cannot_assess=bool(c.cannot_assess),
        )
        for c in criterion_rows(s, row.id)
    )
    ko = KORule(row.ko_criterion, row.ko_floor) if row.ko_criterion is not None else None
    bundle_ko = {
        f: {v: KORule(r["criterion"], int(r["floor"])) for v, r in values.items()}
        for f, values in (row.bundle_ko_rules or {}).items()
    }
    return Rubric(name=row.name, criteria=crits, ko_rule=ko, description=row.description or "",
                  prompt_template=row.prompt_template or "", bundle_ko_rules=bundle_ko)


def load_rubric(s: Session, name: str) -> Rubric:
    return rubric_value(s, get_rubric_row(s, name))


def list_rubrics(s: Session) -> list[dict]:
    out = []
    for row in s.scalars(select(RubricRow).order_by(RubricRow.name)):
        crits = criterion_rows(s, row.id)
        out.append(
            {
                "id": row.id,
                "name": row.name,
                "criteria": [c.key for c in crits],
                "kinds": sorted({c.kind for c in crits}),
                "ko_rule": f"{row.ko_criterion} ≤ {row.ko_floor}" if row.ko_criterion else "",
                "bundle_ko_rules": "; ".join(
                    f"{f}={v}: {r['criterion']} ≤ {r['floor']}"
                    for f, values in (row.bundle_ko_rules or {}).items() for v, r in values.items()
                ),
            }
        )
    return out


def criteria_by_key(s: Session) -> dict[str, list[Criterion]]:
    """Every criterion key known to any rubric → its definitions (labels are keyed by criterion key)."""
    out: dict[str, list[Criterion]] = {}
    for row in s.scalars(select(RubricRow)):
        for c in rubric_value(s, row).criteria:
            out.setdefault(c.key, []).append(c)
    return out


def label_key_conflicts(s: Session) -> dict[str, str]:
    """Criterion keys that rubrics define differently (kind or pass mark) → why labels for them are refused.

    Labels are stored by key, so a key that is binary in one rubric and a 1–5 scale in another would be
    read differently by each; file imports and the Label page both refuse such a key."""
    defs: dict[str, dict[tuple, list[str]]] = {}
    for row in s.scalars(select(RubricRow).order_by(RubricRow.id)):
        for c in rubric_value(s, row).criteria:
            defs.setdefault(c.key, {}).setdefault((c.kind, c.pass_at), []).append(row.name)
    out = {}
    for key, ways in defs.items():
        if len(ways) > 1:
            said = "; ".join(f"{kind}{f' (pass at {p})' if p else ''} in {', '.join(names)}"
                             for (kind, p), names in ways.items())
            out[key] = (f"criterion {key!r} is defined differently by the rubrics ({said}); labels are stored by "
                        "key, so each rubric would read them differently — rename it in one rubric")
    return out


# --------------------------------------------------------------------------- judges and runs


def get_or_create_judge(
    s: Session,
    *,
    kind: str,
    name: str,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    params: dict | None = None,
    timeout_s: float | None = None,
    max_tokens: int | None = None,
    suppress_thinking: bool = False,
) -> Judge:
    params = params or {}
    check_name("judge", name)
    check_name("model", model)
    check_name("key variable name", api_key_env)
    wanted = (base_url, model, api_key_env, params, timeout_s, max_tokens, suppress_thinking)
    for j in s.scalars(select(Judge).where(Judge.kind == kind, Judge.name == name)):
        have = (
            j.base_url,
            j.model,
            j.api_key_env,
            j.params or {},
            j.timeout_s,
            j.max_tokens,
            bool(j.suppress_thinking),
        )
        if have == wanted:
            return j
    j = Judge(
        kind=kind,
        name=name,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        params=params,
        timeout_s=timeout_s,
        max_tokens=max_tokens,
        suppress_thinking=suppress_thinking,
    )
    s.add(j)
    s.flush()
    return j


def get_run(s: Session, ref: str | int) -> Run:
    """A run by name, or by numeric id (``"12"`` works too when no run is named ``12``)."""
    run = s.scalar(select(Run).where(Run.name == str(ref)))
    if run is None and str(ref).isdigit():
        run = s.get(Run, int(ref))
    if run is None:
        raise NotFound(f"no run named or numbered {ref!r} (see `judgekit report runs` or the Workspace page)")
    return run


def update_run(s: Session, run_id: int, **values: Any) -> None:
    """Set columns of one run (the caller's transaction commits)."""
    s.execute(update(Run).where(Run.id == run_id).values(**values))


def finish_run(s: Session, run_id: int, *, status: str, message: str | None, totals: dict, wall_s: float,
               **values: Any) -> None:
    """Close an attempt on a run (live or batch): its status, message and totals, its wall time added to
    the time already spent, ``finished_at`` stamped."""
    update_run(s, run_id, status=status, message=message, totals=totals, wall_s=Run.wall_s + wall_s,
               finished_at=utcnow(), **values)


def unique_run_name(s: Session, base: str) -> str:
    base = base[: NAME_LIMITS["run"] - 10]  # room for a "-N" suffix; a derived name always fits its column
    taken = set(s.scalars(select(Run.name).where(Run.name.like(f"{base}%"))))
    if base not in taken:
        return base
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def create_run(
    s: Session,
    *,
    name: str,
    dataset: Dataset,
    rubric: RubricRow,
    judge: Judge,
    harness: dict,
    example_ids: Sequence[int],
    sample: dict | None = None,
    status: str = "pending",
    repeat_group: str | None = None,
    repeat_index: int | None = None,
    use_cache: bool = True,
) -> Run:
    check_new_name(s, Run, "run", name)
    run = Run(
        name=name,
        dataset_id=dataset.id,
        rubric_id=rubric.id,
        judge_id=judge.id,
        harness=harness,
        sample=sample or {},
        status=status,
        repeat_group=repeat_group,
        repeat_index=repeat_index,
        use_cache=use_cache,
    )
    s.add(run)
    s.flush()
    rows = [{"run_id": run.id, "example_id": e, "position": i} for i, e in enumerate(example_ids)]
    for chunk in _chunks(rows, 5000):
        s.execute(insert(RunExample), chunk)
    return run


def existing_run_names(s: Session, names: Sequence[str]) -> list[str]:
    """Those of ``names`` that runs already have (in the order given)."""
    taken = set(s.scalars(select(Run.name).where(Run.name.in_(list(names)))))
    return [n for n in names if n in taken]


def repeat_runs(s: Session, run: Run) -> list[Run]:
    """The runs of ``run``'s repeat group (``judgekit run --repeat N``) in repeat order, ``run`` included;
    just ``[run]`` for a run that is no one's repeat."""
    if run.repeat_group is None:
        return [run]
    return list(s.scalars(select(Run).where(Run.repeat_group == run.repeat_group)
                          .order_by(Run.repeat_index, Run.id)))


def run_example_ids(s: Session, run_id: int) -> list[int]:
    return list(
        s.scalars(
            select(RunExample.example_id).where(RunExample.run_id == run_id).order_by(RunExample.position)
        )
    )


def list_runs(s: Session) -> list[dict]:
    n_ex = select(RunExample.run_id, func.count().label("n")).group_by(RunExample.run_id).subquery()
    bundle_counts = (
        select(BundleVerdict.run_id, func.count().label("verdicts"), func.count(BundleVerdict.value).label("scored"))
        .group_by(BundleVerdict.run_id)
        .subquery()
    )
    n_bundles = select(RunBundle.run_id, func.count().label("n")).group_by(RunBundle.run_id).subquery()
    q = (
        select(Run, Judge, Dataset.name, RubricRow.name, n_ex.c.n,
               bundle_counts.c.verdicts, bundle_counts.c.scored, n_bundles.c.n)
        .join(Judge, Judge.id == Run.judge_id)
        .join(Dataset, Dataset.id == Run.dataset_id)
        .join(RubricRow, RubricRow.id == Run.rubric_id)
        .outerjoin(n_ex, n_ex.c.run_id == Run.id)
        .outerjoin(bundle_counts, bundle_counts.c.run_id == Run.id)
        .outerjoin(n_bundles, n_bundles.c.run_id == Run.id)
        .order_by(Run.id)
    )
    out = []
    for run, judge, ds, rb, n, bv, bs, nb in s.execute(q).all():
        nv, ns, nc = verdict_counts(s, run.id)
        out.append(
            {
                "id": run.id,
                "name": run.name,
                "status": run.status,
                "dataset": ds,
                "rubric": rb,
                "judge": judge_label(judge),
                "judge_kind": judge.kind,
                "harness": harness_label(run.harness),
                "level": run_level(run),
                "examples": n or 0,
                "bundles": nb or 0,
                "verdicts": (nv or 0) + (bv or 0),
                "scored": (ns or 0) + (bs or 0),
                "cannot_assess": nc or 0,
                "repeat": f"{run.repeat_index} of group {run.repeat_group}" if run.repeat_group else "",
                "calls": (run.totals or {}).get("calls"),
                "cache_hits": (run.totals or {}).get("cache_hits", 0),
                "tokens": _tokens(run.totals or {}),
                "wall_s": round(run.wall_s or 0.0, 2),
                "message": run.message or "",
                "created_at": run.created_at,
            }
        )
    return out


def _tokens(totals: dict) -> int | None:
    if not totals:
        return None
    return int((totals.get("prompt_tokens") or 0) + (totals.get("completion_tokens") or 0))


def judge_label(judge: Judge) -> str:
    """How a judge is named in every view; the simulated judge always says so."""
    if judge.kind == "simulated":
        return f"{judge.name} (simulated)"
    if judge.kind == "imported":
        return f"{judge.name}{f': {judge.model}' if judge.model else ''} (imported)"
    if judge.kind == "local":
        return f"{judge.model} (bundled local judge)"
    if judge.model:
        return (
            f"{judge.model} @ {redact.redact_url(judge.base_url)}"
            if judge.kind == "openai"
            else f"{judge.name}: {judge.model}"
        )
    return judge.name


def run_level(run: Run) -> str:
    """``bundle`` for a run whose verdicts are per bundle (``judgekit run --level bundle``, or a critique
    of one), else ``answer``."""
    return "bundle" if (run.harness or {}).get("level") == "bundle" else "answer"


def harness_label(harness: dict) -> str:
    if not harness:
        return ""
    kind = harness.get("kind", "")
    if harness.get("level") == "bundle":
        kind = f"bundle:{kind}"
    if kind == "grouped":
        kind = "grouped:" + "|".join("+".join(g) for g in harness.get("groups", []))
    opts = [harness.get("order", "")]
    opts += [flag for flag in ("shuffle", "independence_note", "logprobs") if harness.get(flag)]
    if harness.get("prompt_variant") and harness.get("prompt_variant") != "default":
        opts.append(f"variant={harness['prompt_variant']}")
    return kind + (" [" + ", ".join(o for o in opts if o) + "]" if any(opts) else "")


def delete_run(s: Session, run: Run) -> None:
    for table in (Verdict, BundleVerdict, Call, RunExample, RunBundle, RunLease):
        s.execute(delete(table).where(table.run_id == run.id))
    s.delete(run)


# --------------------------------------------------------------------------- labels


def annotator_id(s: Session, name: str) -> int:
    check_name("annotator", name)
    aid = s.scalar(select(Annotator.id).where(Annotator.name == name))
    if aid is None:
        aid = s.execute(insert(Annotator).values(name=name).returning(Annotator.id)).scalar_one()
    return aid


def upsert_labels(s: Session, rows: Sequence[dict]) -> int:
    """Insert or update labels (rows: example_id (internal), criterion, annotator, value, note).

    Upsert on the unique key (example, criterion, annotator) so two annotators labeling at once — or
    one annotator editing — never lose or duplicate a label.
    """
    if not rows:
        return 0
    ids = {name: annotator_id(s, name) for name in {r["annotator"] for r in rows}}
    now = utcnow()
    payload = [
        {
            "example_id": r["example_id"],
            "criterion": r["criterion"],
            "annotator_id": ids[r["annotator"]],
            "value": r["value"],
            "note": r.get("note"),
            "created_at": now,
            "updated_at": now,
        }
        for r in rows
    ]
    stmt = _dialect_insert(s)(Label.__table__)
    stmt = stmt.on_conflict_do_update(
        index_elements=["example_id", "criterion", "annotator_id"],
        set_={"value": stmt.excluded.value, "note": stmt.excluded.note, "updated_at": stmt.excluded.updated_at},
    )
    conn = s.connection()
    for chunk in _chunks(payload, 5000):
        conn.execute(stmt, list(chunk))  # executemany: one compiled statement, not a 2000-row VALUES list
    return len(payload)


def labels_for_dataset(s: Session, dataset_id: int) -> list[dict]:
    q = (
        select(Example.ext_id, Label.criterion, Annotator.name, Label.value, Label.note, Label.updated_at)
        .join(Example, Example.id == Label.example_id)
        .join(Annotator, Annotator.id == Label.annotator_id)
        .where(Example.dataset_id == dataset_id)
        .order_by(Annotator.name, Example.id, Label.criterion)
    )
    return [
        {"example_id": e, "criterion": c, "annotator": a, "value": v, "note": n, "updated_at": u}
        for e, c, a, v, n, u in s.execute(q)
    ]


def annotators_for_dataset(s: Session, dataset_id: int) -> list[str]:
    """Annotators with at least one label in the dataset: one EXISTS probe per annotator that stops at its
    first label, not a DISTINCT over every label (~10x faster with the 1M planted labels of a 100k demo)."""
    has = (
        select(Label.id)
        .join(Example, Example.id == Label.example_id)
        .where(Label.annotator_id == Annotator.id, Example.dataset_id == dataset_id)
        .exists()
    )
    return list(s.scalars(select(Annotator.name).where(has).order_by(Annotator.name)))


def cache_namespace(s: Session) -> str:
    """The matrix cache's name for this database: its URL and its identity (a database recreated at the same
    URL reuses ids and versions, so the URL alone would serve the old database's numbers)."""
    return f"{s.get_bind().url.render_as_string(hide_password=True)}#{database_identity(s)}"


def run_cache_key(run: Run) -> str:
    """A run's name in the matrix cache: ids can be reused after a delete, so its creation time is part of it."""
    return f"{run.id}:{run.created_at}"


def last_verdict_id(s: Session, run_id: int) -> int | None:
    """A run's largest verdict id: its verdicts' version (they are only ever inserted — a resume skips the
    ones that exist — and deleted only with the run). An index lookup, not a count."""
    return s.scalar(select(func.max(Verdict.id)).where(Verdict.run_id == run_id))


def run_versions(s: Session, dataset_id: int) -> dict[int, int | None]:
    """:func:`last_verdict_id` of every run of a dataset, in one query."""
    last = select(func.max(Verdict.id)).where(Verdict.run_id == Run.id).scalar_subquery()
    return {int(rid): v for rid, v in s.execute(select(Run.id, last).where(Run.dataset_id == dataset_id))}


def _cached_counts(
    s: Session, kind: str, key: str, version: str, count: Callable[[], dict[str, tuple[int, ...]]], width: int
) -> dict[str, tuple[int, ...]]:
    """Per-key integer counts through the matrix cache (stored as a key array and a count matrix)."""
    import numpy as np  # here, not at the top: the CLI's start-up does not wait for it

    def arrays() -> dict[str, Any]:
        counts = count()
        keys = sorted(counts)
        return {"keys": np.array(keys, dtype=str),
                "counts": np.array([counts[k] for k in keys], dtype=np.int64).reshape(len(keys), width)}

    got = matrix_cache.cached(cache_namespace(s), kind, key, version, arrays)
    return {str(k): tuple(int(v) for v in row) for k, row in zip(got["keys"], got["counts"], strict=True)}


def labels_version(s: Session) -> tuple[int, int | None, str | None]:
    """The labels' state, for knowing whether anything derived from them still holds: their count (catches
    deletions), largest id (inserts) and latest ``updated_at`` (edits: labels are upserted in place). Over
    every dataset — cheaper than joining examples (three index reads), and it only errs on the side of
    recomputing. Three statements: SQLite answers a lone ``max()`` from an index, but not one beside
    ``count()``."""
    n = s.scalar(select(func.count()).select_from(Label))
    last = s.scalar(select(func.max(Label.id)))
    updated = s.scalar(select(func.max(Label.updated_at)))
    return int(n or 0), last, None if updated is None else str(updated)


def label_outcomes(s: Session, dataset_id: int, annotators: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Per criterion key: (labels, of which *unsure*) by the named annotators in a dataset; read through the
    matrix cache, versioned by :func:`labels_version`."""

    def count() -> dict[str, tuple[int, int]]:
        q = (
            select(Label.criterion, func.count(), func.count().filter(Label.value.is_(None)))
            .join(Example, Example.id == Label.example_id)
            .join(Annotator, Annotator.id == Label.annotator_id)
            .where(Example.dataset_id == dataset_id, Annotator.name.in_(list(annotators)))
            .group_by(Label.criterion)
        )
        return {c: (int(n), int(u)) for c, n, u in s.execute(q)}

    return _cached_counts(s, "label-outcomes", f"{dataset_id}:{list(annotators)}", str(labels_version(s)), count, 2)


def annotator_roles(s: Session, names: Sequence[str]) -> list[str]:
    """Each annotator's role (``annotator`` or ``adjudicator``), in the order of ``names``; an unknown name
    counts as an annotator."""
    roles = dict(s.execute(select(Annotator.name, Annotator.role).where(Annotator.name.in_(list(names)))).all())
    return [roles.get(n) or "annotator" for n in names]


# --------------------------------------------------------------------------- verdicts


def verdict_counts(s: Session, run_id: int) -> tuple[int, int, int]:
    """A run's (verdicts, scored, "cannot assess") over all criteria, from :func:`verdict_outcomes`."""
    outcomes = verdict_outcomes(s, run_id).values()
    return (sum(n for n, _, _ in outcomes), sum(n - u - c for n, u, c in outcomes), sum(c for _, _, c in outcomes))


def verdict_outcomes(s: Session, run_id: int) -> dict[str, tuple[int, int, int]]:
    """Per criterion key of a run: (verdicts, unscored, "cannot assess") — the one count of a run's verdicts
    behind the run listing, its totals and its progress. Read through the matrix cache, versioned by
    the run's largest verdict id (a GROUP BY over a 100k-answer run's 600k verdicts costs ~0.3 s)."""
    run = s.get(Run, run_id)
    if run is None:
        return {}

    def count() -> dict[str, tuple[int, int, int]]:
        q = (
            select(
                CriterionRow.key,
                func.count(),
                func.count().filter(Verdict.value.is_(None), Verdict.cannot_assess.is_(False)),
                func.count().filter(Verdict.cannot_assess.is_(True)),
            )
            .join(CriterionRow, CriterionRow.id == Verdict.criterion_id)
            .where(Verdict.run_id == run_id)
            .group_by(CriterionRow.key)
        )
        return {k: (int(n), int(u), int(c)) for k, n, u, c in s.execute(q)}

    return _cached_counts(s, "outcomes", run_cache_key(run), str(last_verdict_id(s, run_id)), count, 3)


def insert_verdicts(s: Session, rows: Sequence[dict]) -> None:
    for chunk in _chunks(list(rows), 5000):
        s.execute(insert(Verdict), chunk)


def _dialect_insert(s: Session):
    dialect = s.get_bind().dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:  # pragma: no cover - other backends are not supported
        raise RuntimeError(f"judgekit supports SQLite and PostgreSQL, not {dialect}")
    return dialect_insert


def insert_call(s: Session, call: dict, verdicts: Sequence[dict]) -> int:
    """Store one judge call and its verdicts; a verdict that already exists (resume) is kept as it was."""
    return insert_calls(s, [call], [verdicts])[0]


def insert_calls(s: Session, calls: Sequence[dict], verdicts: Sequence[Sequence[dict]]) -> list[int]:
    """Store finished judge calls and their verdicts with two executemany statements (the runner's group
    commit); ``verdicts[i]`` belong to ``calls[i]``. Existing verdicts (a resume) are kept as they were."""
    conn = s.connection()
    table = Call.__table__
    ids = list(conn.execute(insert(table).returning(table.c.id, sort_by_parameter_order=True), list(calls)).scalars())
    rows = [{**v, "call_id": cid} for cid, vs in zip(ids, verdicts, strict=True) for v in vs]
    for table, unit in ((Verdict, "example_id"), (BundleVerdict, "bundle_id")):  # per answer / per bundle
        mine = [r for r in rows if unit in r]
        if mine:
            stmt = _dialect_insert(s)(table.__table__)
            conn.execute(stmt.on_conflict_do_nothing(index_elements=["run_id", unit, "criterion_id"]), mine)
    return ids


def insert_cached_replies(s: Session, rows: Sequence[dict]) -> None:
    """Store response-cache entries (key, base_url, model, reply, created_at); a key already cached keeps
    its first reply (two runs racing on the same request store it once)."""
    if rows:
        stmt = _dialect_insert(s)(ResponseCache.__table__)
        s.connection().execute(stmt.on_conflict_do_nothing(index_elements=["key"]), list(rows))


def row_counts(s: Session) -> dict[str, int]:
    """Rows per table — used by tests to prove a rejected import wrote nothing."""
    return {
        m.__tablename__: s.scalar(select(func.count()).select_from(m))
        for m in (
            Dataset,
            Example,
            RubricRow,
            CriterionRow,
            Judge,
            Run,
            RunExample,
            Call,
            Verdict,
            Annotator,
            Label,
            LabelSet,
            LabelSetItem,
            Bundle,
            BundleExample,
            RunBundle,
            BundleVerdict,
        )
    }


# --------------------------------------------------------------------------- run totals


def run_totals(s: Session, run_id: int) -> dict:
    """Calls, retries, failures, tokens and latency percentiles of a run, over all its sessions — the one
    count behind ``run.totals`` (runner, batch, imports) and :func:`judgekit.reports.run_cost`.

    ``calls`` counts every call of the run, ``cache_hits`` those answered from the response cache:
    nothing was sent for them, so they add no retries, latency or tokens; ``saved_prompt_tokens`` /
    ``saved_completion_tokens`` are what those replies cost when they were first made. ``unscored``
    counts verdicts no value could be read for; ``cannot_assess`` those where the judge said so.
    """
    import numpy as np  # here, not at the top: the CLI's start-up does not wait for it

    c = Call
    row = s.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((c.attempts > 0, c.attempts - 1), else_=0)), 0),
            func.coalesce(func.sum(c.prompt_tokens), 0),
            func.coalesce(func.sum(c.completion_tokens), 0),
            func.coalesce(func.sum(c.cached_tokens), 0),
            func.count().filter(c.status != "ok"),
            func.count().filter(c.status == "rejected"),
            func.count(func.distinct(case((c.status == "rejected", c.example_id)))),
            func.count().filter(c.from_cache.is_(True)),
        ).where(c.run_id == run_id)
    ).one()
    latencies = np.array(
        s.scalars(
            select(c.latency_s).where(c.run_id == run_id, c.status == "ok", c.latency_s.is_not(None))
        ).all(),
        dtype=float,
    )
    outcomes = verdict_outcomes(s, run_id).values()
    unscored, cannot = sum(u for _, u, _ in outcomes), sum(c for _, _, c in outcomes)
    B = BundleVerdict
    unscored += s.scalar(select(func.count()).where(B.run_id == run_id, B.value.is_(None))) or 0
    saved = {"prompt_tokens": 0, "completion_tokens": 0}
    if row[8]:
        for request in s.scalars(select(c.request).where(c.run_id == run_id, c.from_cache.is_(True))):
            for k, v in ((request or {}).get("cache") or {}).get("saved", {}).items():
                saved[k] = saved.get(k, 0) + int(v or 0)
    p50, p95 = np.percentile(latencies, [50, 95]).round(4).tolist() if latencies.size else (None, None)
    return {
        "calls": int(row[0]),
        "retries": int(row[1]),
        "prompt_tokens": int(row[2]),
        "completion_tokens": int(row[3]),
        "cached_tokens": int(row[4]),
        "failed_calls": int(row[5]),  # no reply: failed after retries, or rejected for good
        "rejected_calls": int(row[6]),  # of those, refused for good for their example (verdicts unscored)
        "rejected_examples": int(row[7]),
        "unscored": int(unscored or 0),
        "cannot_assess": int(cannot or 0),
        "cache_hits": int(row[8]),
        "saved_prompt_tokens": saved["prompt_tokens"],
        "saved_completion_tokens": saved["completion_tokens"],
        "latency_p50": p50,
        "latency_p95": p95,
    }
