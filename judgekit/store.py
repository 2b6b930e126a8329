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
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from judgekit import config
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


class RunExample(Base):
    """The examples a run covers (its sample), in the order the runner sends them."""

    __tablename__ = "run_examples"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)


class Call(Base):
    __tablename__ = "calls"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"))
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
    response_text: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


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
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), index=True)
    criterion: Mapped[str] = mapped_column(String(64))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id", ondelete="CASCADE"))
    value: Mapped[int | None] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


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


# --------------------------------------------------------------------------- engine


class NotFound(LookupError):
    """A named dataset / rubric / run does not exist."""


_engines: dict[str, Engine] = {}
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


def engine_for(url: str | None = None, *, migrate: bool = True) -> Engine:
    """The process-wide engine for a URL (default: :func:`judgekit.config.db_url`), migrated on first use."""
    url = config.db_url(url)
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = make_engine(url)
            if migrate:
                upgrade(engine)
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


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
    ds = s.scalar(select(Dataset).where(Dataset.name == name))
    if ds is None:
        raise NotFound(f"no dataset named {name!r} (see `judgekit import-dataset` or `judgekit demo`)")
    return ds


def insert_dataset(s: Session, name: str, rows: Sequence[dict], source: str | None = None) -> Dataset:
    """Create a dataset and bulk-insert its examples (rows: id, question, context, answer, metadata)."""
    if s.scalar(select(Dataset.id).where(Dataset.name == name)) is not None:
        raise ValueError(f"a dataset named {name!r} already exists")
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
    if s.scalar(select(RubricRow.id).where(RubricRow.name == rubric.name)) is not None:
        raise ValueError(f"a rubric named {rubric.name!r} already exists")
    row = RubricRow(
        name=rubric.name,
        description=rubric.description,
        ko_criterion=rubric.ko_rule.criterion if rubric.ko_rule else None,
        ko_floor=rubric.ko_rule.floor if rubric.ko_rule else None,
        prompt_template=rubric.prompt_template or None,
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
            }
            for i, c in enumerate(rubric.criteria)
        ],
    )
    return row


def get_rubric_row(s: Session, name: str) -> RubricRow:
    row = s.scalar(select(RubricRow).where(RubricRow.name == name))
    if row is None:
        raise NotFound(f"no rubric named {name!r} (see `judgekit import-rubric`)")
    return row


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
        )
        for c in criterion_rows(s, row.id)
    )
    ko = KORule(row.ko_criterion, row.ko_floor) if row.ko_criterion is not None else None
    return Rubric(name=row.name, criteria=crits, ko_rule=ko, description=row.description or "",
                  prompt_template=row.prompt_template or "")


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


def unique_run_name(s: Session, base: str) -> str:
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
) -> Run:
    if s.scalar(select(Run.id).where(Run.name == name)) is not None:
        raise ValueError(f"a run named {name!r} already exists")
    run = Run(
        name=name,
        dataset_id=dataset.id,
        rubric_id=rubric.id,
        judge_id=judge.id,
        harness=harness,
        sample=sample or {},
        status=status,
    )
    s.add(run)
    s.flush()
    rows = [{"run_id": run.id, "example_id": e, "position": i} for i, e in enumerate(example_ids)]
    for chunk in _chunks(rows, 5000):
        s.execute(insert(RunExample), chunk)
    return run


def run_example_ids(s: Session, run_id: int) -> list[int]:
    return list(
        s.scalars(
            select(RunExample.example_id).where(RunExample.run_id == run_id).order_by(RunExample.position)
        )
    )


def list_runs(s: Session) -> list[dict]:
    counts = (
        select(Verdict.run_id, func.count().label("verdicts"), func.count(Verdict.value).label("scored"))
        .group_by(Verdict.run_id)
        .subquery()
    )
    n_ex = select(RunExample.run_id, func.count().label("n")).group_by(RunExample.run_id).subquery()
    q = (
        select(Run, Judge, Dataset.name, RubricRow.name, counts.c.verdicts, counts.c.scored, n_ex.c.n)
        .join(Judge, Judge.id == Run.judge_id)
        .join(Dataset, Dataset.id == Run.dataset_id)
        .join(RubricRow, RubricRow.id == Run.rubric_id)
        .outerjoin(counts, counts.c.run_id == Run.id)
        .outerjoin(n_ex, n_ex.c.run_id == Run.id)
        .order_by(Run.id)
    )
    out = []
    for run, judge, ds, rb, nv, ns, n in s.execute(q):
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
                "examples": n or 0,
                "verdicts": nv or 0,
                "scored": ns or 0,
                "calls": (run.totals or {}).get("calls"),
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
        return f"{judge.name} (imported)"
    if judge.kind == "local":
        return f"{judge.model} (bundled local judge)"
    if judge.model:
        return (
            f"{judge.model} @ {judge.base_url}" if judge.kind == "openai" else f"{judge.name}: {judge.model}"
        )
    return judge.name


def harness_label(harness: dict) -> str:
    if not harness:
        return ""
    kind = harness.get("kind", "")
    if kind == "grouped":
        kind = "grouped:" + "|".join("+".join(g) for g in harness.get("groups", []))
    opts = [harness.get("order", "")]
    opts += [flag for flag in ("shuffle", "independence_note", "logprobs") if harness.get(flag)]
    if harness.get("prompt_variant") and harness.get("prompt_variant") != "default":
        opts.append(f"variant={harness['prompt_variant']}")
    return kind + (" [" + ", ".join(o for o in opts if o) + "]" if any(opts) else "")


def delete_run(s: Session, run: Run) -> None:
    for table in (Verdict, Call, RunExample):
        s.execute(delete(table).where(table.run_id == run.id))
    s.delete(run)


# --------------------------------------------------------------------------- labels


def annotator_id(s: Session, name: str) -> int:
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


# --------------------------------------------------------------------------- verdicts


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
    if rows:
        stmt = _dialect_insert(s)(Verdict.__table__)
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["run_id", "example_id", "criterion_id"]), rows)
    return ids


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
        )
    }
