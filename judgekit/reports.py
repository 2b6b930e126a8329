"""Reports: statistics from the store, assembled into report objects and rendered.

Where this sits in the flow: :mod:`judgekit.store` holds verdicts and labels; this module loads each
*source* (a run, one annotator, or the human consensus) with one column query into an
``(n_examples, n_criteria)`` float matrix aligned on the dataset's example index, calls the pure
functions of :mod:`judgekit.stats`, and returns frozen dataclasses. Each report renders as a JSON-able
dict (``to_dict``; the shapes of design.md's "Contracts other tools rely on"), as a plain-text table
(``render_*_table``), and the whole workbench view as a self-contained HTML or Markdown document
(:func:`build_report`, :func:`render_html`, :func:`render_markdown`). The CLI (``cli_report.py``) and
the dashboard pages are thin layers over these functions.

Conventions: 1.0 = pass, 0.0 = fail, NaN = unscored / unlabelled / unresolved. Scale criteria enter
binary views through ``pass_at``. Statistics over two columns use the rows where both are present and
report that n. ``to_dict`` output may hold NaN; :func:`jsonable` turns it into ``None`` (JSON ``null``).
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from judgekit import config, matrix_cache, stats, store
from judgekit.rubric import Criterion

__all__ = [
    "AgreementReport",
    "AnnotatorAgreement",
    "AuditRow",
    "CompareReport",
    "CostSummary",
    "CrosstabReport",
    "ExampleIndex",
    "PhiColumn",
    "PhiReport",
    "Price",
    "Report",
    "Source",
    "agreement_for",
    "agreement_report",
    "annotator_agreement",
    "association_audit",
    "build_report",
    "compare_runs",
    "compare_sources",
    "crosstab_report",
    "jsonable",
    "load_annotator",
    "load_human",
    "load_prices",
    "load_run",
    "phi_report",
    "price_calls",
    "render_agreement_table",
    "render_compare_table",
    "render_crosstab_table",
    "render_html",
    "render_markdown",
    "render_phi_table",
    "render_runs_table",
    "resolve_dataset",
    "run_cost",
    "runs_report",
    "judge_vs_judge",
]

REFERENCE_ANNOTATOR = "reference"
"""The demo's planted truth. Treated like any annotator, but left out of the ``--human`` consensus."""

SourceKind = Literal["run", "human", "annotator"]
Outcome = Literal["pass", "fail"]
OUTCOMES: tuple[Outcome, Outcome] = ("pass", "fail")


# --------------------------------------------------------------------------------------------- JSON


def jsonable(x: Any) -> Any:
    """``x`` with numpy scalars/arrays turned into Python values and every NaN/inf into ``None``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, bool | np.bool_):
        return bool(x)
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        f = float(x)
        return f if math.isfinite(f) else None
    if hasattr(x, "isoformat"):
        return x.isoformat()
    return x


def _round(x: float, digits: int) -> float:
    x = float(x)
    return round(x, digits) if math.isfinite(x) else math.nan


# --------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True, eq=False)
class ExampleIndex:
    """The rows every source of a dataset is aligned on: internal example ids (sorted) and user ids."""

    dataset_id: int
    dataset: str
    ids: NDArray[np.int64]
    ext: NDArray[np.object_]

    def __len__(self) -> int:
        return int(self.ids.size)

    def rows_of(self, example_ids: NDArray[np.int64]) -> NDArray[np.intp]:
        return np.searchsorted(self.ids, example_ids)

    def ext_ids(self, rows: Iterable[int] | NDArray[np.intp]) -> list[str]:
        return [
            str(e)
            for e in self.ext[
                np.asarray(list(rows) if not isinstance(rows, np.ndarray) else rows, dtype=np.intp)
            ]
        ]


_index_cache_key = "_judgekit_example_index"


def example_index(s: Session, dataset_id: int) -> ExampleIndex:
    """The dataset's example index (cached on the session: every source of one report shares it)."""
    cache: dict[int, ExampleIndex] = s.info.setdefault(_index_cache_key, {})
    if dataset_id not in cache:
        name = s.scalar(select(store.Dataset.name).where(store.Dataset.id == dataset_id)) or str(dataset_id)
        E = store.Example
        n, last = s.execute(select(func.count(), func.max(E.id)).where(E.dataset_id == dataset_id)).one()

        def compute() -> dict[str, np.ndarray]:
            rows = s.execute(select(E.id, E.ext_id).where(E.dataset_id == dataset_id).order_by(E.id)).all()
            ids, ext = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [])
            return {"ids": np.asarray(ids, dtype=np.int64), "ext": np.asarray(ext, dtype=np.str_)}

        arrays = matrix_cache.cached(_db_key(s), "index", str(dataset_id), f"{n}:{last}", compute)
        cache[dataset_id] = ExampleIndex(dataset_id, name, arrays["ids"], arrays["ext"].astype(object))
    return cache[dataset_id]


def _db_key(s: Session) -> str:
    return s.get_bind().url.render_as_string(hide_password=True)


def _columns(s: Session, stmt, n: int) -> list[NDArray[np.float64]]:
    """Run a numeric column query; each column as a float array (NULL → NaN).

    The statement is compiled by SQLAlchemy but fetched on the DBAPI cursor of the session's own
    connection (same transaction): plain tuples go straight into one ``np.array``, which is ~3x faster
    than building Row objects for a million verdicts.
    """
    conn = s.connection()
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.params
    args = tuple(params[k] for k in compiled.positiontup or ()) if compiled.positional else params
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.execute(str(compiled), args)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    if not rows:
        return [np.empty(0) for _ in range(n)]
    return list(np.array(rows, dtype=np.float64).reshape(len(rows), n).T)


def _thresholds(criteria: Sequence[Criterion]) -> NDArray[np.float64]:
    """Per-column pass threshold: ``pass_at`` for scale criteria, 1 for binary (1 ≥ 1 pass, 0 fail)."""
    return np.array([(c.pass_at or 3) if c.is_scale else 1 for c in criteria], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Source:
    """One column of evidence -- a run, an annotator, or the human consensus -- over a dataset's examples.

    ``raw`` holds stored values (1/0 or 1–5; NaN where unscored or absent), ``binary`` the pass/fail view
    (scale criteria through ``pass_at``; for the human consensus the majority of the annotators'
    binary views). Rows follow ``index``; ``covered`` marks rows with at least one scored value.
    ``key`` names the source in every output: ``run:NAME``, ``human``, ``human:NAME``, ``annotator:NAME``.
    """

    key: str
    kind: SourceKind
    judge: str
    criteria: tuple[Criterion, ...]
    index: ExampleIndex
    raw: NDArray[np.float64]
    binary: NDArray[np.float64]
    p_pass: NDArray[np.float64] | None = None
    run_id: int | None = None
    judge_kind: str | None = None
    model: str | None = None
    missing: frozenset[str] = frozenset()
    judged: frozenset[str] = frozenset()  # criteria with at least one stored row (scored or not)

    @property
    def keys(self) -> list[str]:
        return [c.key for c in self.criteria]

    @property
    def covered(self) -> NDArray[np.bool_]:
        return ~np.isnan(self.raw).all(axis=1) if self.raw.shape[1] else np.zeros(len(self.index), bool)

    @property
    def n(self) -> int:
        return int(self.covered.sum())

    @property
    def is_human(self) -> bool:
        return self.kind != "run"

    @property
    def noun(self) -> str:
        return "verdict" if self.kind == "run" else "label"

    def col(self, key: str) -> int:
        try:
            return self.keys.index(key)
        except ValueError:
            raise ValueError(
                f"criterion {key!r} is not in {self.key} (criteria: {', '.join(self.keys) or 'none'})"
            ) from None

    def select(self, keys: Sequence[str]) -> Source:
        """The same source with columns ``keys`` in that order (all-NaN columns for keys it lacks)."""
        n = len(self.index)
        have = {k: i for i, k in enumerate(self.keys)}
        crits, missing = [], set(self.missing)
        raw = np.full((n, len(keys)), np.nan)
        binary = np.full((n, len(keys)), np.nan)
        pp = None if self.p_pass is None else np.full((n, len(keys)), np.nan)
        for j, k in enumerate(keys):
            i = have.get(k)
            if i is None:
                crits.append(Criterion(key=k, question=""))
                missing.add(k)
                continue
            crits.append(self.criteria[i])
            raw[:, j] = self.raw[:, i]
            binary[:, j] = self.binary[:, i]
            if pp is not None:
                pp[:, j] = self.p_pass[:, i]
        return replace(
            self, criteria=tuple(crits), raw=raw, binary=binary, p_pass=pp, missing=frozenset(missing)
        )


def load_run(s: Session, ref: str | int | store.Run) -> Source:
    """A run's verdicts as a source: one query on (example, criterion, value, p_pass) columns."""
    run = ref if isinstance(ref, store.Run) else store.get_run(s, ref)
    judge = s.get(store.Judge, run.judge_id)
    rubric_row = s.get(store.RubricRow, run.rubric_id)
    criteria = store.rubric_value(s, rubric_row).criteria
    crit_ids = np.array([c.id for c in store.criterion_rows(s, run.rubric_id)], dtype=np.float64)
    index = example_index(s, run.dataset_id)

    def compute() -> dict[str, np.ndarray]:
        ex, cid, value, p_pass = _columns(
            s,
            select(
                store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value, store.Verdict.p_pass
            ).where(store.Verdict.run_id == run.id),
            4,
        )
        order = np.argsort(crit_ids)
        cols = order[np.searchsorted(crit_ids[order], cid)] if cid.size else np.empty(0, np.intp)
        rows = index.rows_of(ex.astype(np.int64))
        raw = np.full((len(index), len(criteria)), np.nan)
        raw[rows, cols] = value
        pp = np.full_like(raw, np.nan)
        pp[rows, cols] = p_pass
        return {"raw": raw, "p_pass": pp, "judged": np.unique(cols).astype(np.int64)}

    # verdicts are only ever inserted (resume skips existing ones), so the largest id versions a run
    last = s.scalar(select(func.max(store.Verdict.id)).where(store.Verdict.run_id == run.id))
    # (ids can be reused after a delete, so the run's creation time is part of the key)
    arrays = matrix_cache.cached(_db_key(s), "run", f"{run.id}:{run.created_at}",
                                 f"{last}:{len(index)}:{crit_ids.tolist()}", compute)
    raw, pp = arrays["raw"], arrays["p_pass"]
    judged = frozenset(criteria[int(c)].key for c in arrays["judged"])
    if not np.isfinite(pp).any():
        pp = None
    return Source(
        key=f"run:{run.name}",
        kind="run",
        judge=store.judge_label(judge) if judge else "?",
        criteria=tuple(criteria),
        index=index,
        raw=raw,
        binary=stats.binarize(raw, _thresholds(criteria)),
        p_pass=pp,
        judged=judged,
        run_id=run.id,
        judge_kind=judge.kind if judge else None,
        model=judge.model if judge else None,
    )


def _label_criteria(s: Session, keys: Iterable[str]) -> tuple[Criterion, ...]:
    """Definitions for label keys, in rubric order (rubrics by id), then any stray keys alphabetically."""
    wanted = set(keys)
    by_key = store.criteria_by_key(s)
    ordered: list[str] = []
    rubric_ids = s.scalars(select(store.RubricRow.id).order_by(store.RubricRow.id)).all()
    for rid in rubric_ids:
        for c in store.criterion_rows(s, rid):
            if c.key in wanted and c.key not in ordered:
                ordered.append(c.key)
    ordered += sorted(wanted - set(ordered))
    return tuple(by_key[k][0] if k in by_key else Criterion(key=k, question="") for k in ordered)


def _labelled_keys(s: Session, dataset_id: int) -> list[str]:
    """Criterion keys with at least one label in the dataset: an EXISTS probe per known key (cheap), plus
    a scan for keys no rubric defines only when such labels exist."""
    L, E = store.Label, store.Example
    in_dataset = select(L.id).join(E, E.id == L.example_id).where(E.dataset_id == dataset_id)
    known = list(store.criteria_by_key(s))
    keys = [k for k in known if s.scalar(select(in_dataset.where(L.criterion == k).exists()))]
    if s.scalar(select(in_dataset.where(L.criterion.not_in(known)).exists())):
        keys += s.scalars(
            select(L.criterion).join(E, E.id == L.example_id)
            .where(E.dataset_id == dataset_id, L.criterion.not_in(known)).distinct()
        ).all()
    return keys


def label_tensor(
    s: Session, index: ExampleIndex, criteria: Sequence[Criterion] | None, annotators: Sequence[str] | None
) -> tuple[list[str], tuple[Criterion, ...], NDArray[np.float64], frozenset[str]]:
    """Labels as ``(n_annotators, n_examples, n_criteria)`` raw values, and the keys that have a label.

    One numeric column query per criterion, fetched straight into numpy (a 100k-example demo holds 1M
    labels: Row objects for them would cost seconds and most of a gigabyte)."""
    names = list(annotators) if annotators is not None else store.annotators_for_dataset(s, index.dataset_id)
    ann_ids = dict(s.execute(select(store.Annotator.name, store.Annotator.id)
                             .where(store.Annotator.name.in_(names))).all())
    names = [a for a in names if a in ann_ids]
    if criteria is None:
        criteria = _label_criteria(s, _labelled_keys(s, index.dataset_id))
    if names:
        lo, hi = index.ids.min(initial=0), index.ids.max(initial=0)
        lab = store.Label
        version = s.execute(
            select(func.count(), func.max(lab.id), func.max(lab.updated_at))
            .where(lab.example_id.between(int(lo), int(hi)))
        ).one()
        key = f"{index.dataset_id}:{names}:{[c.key for c in criteria]}"
        arrays = matrix_cache.cached(
            _db_key(s), "labels", key, f"{tuple(version)}:{len(index)}",
            lambda: _fetch_label_tensor(s, index, criteria, names, ann_ids),
        )
        return names, tuple(criteria), arrays["L"], frozenset(str(k) for k in arrays["judged"])
    return names, tuple(criteria), np.full((0, len(index), len(criteria)), np.nan), frozenset()


def _fetch_label_tensor(
    s: Session, index: ExampleIndex, criteria: Sequence[Criterion], names: list[str], ann_ids: dict[str, int]
) -> dict[str, np.ndarray]:
    L = np.full((len(names), len(index), len(criteria)), np.nan)
    ids = np.array([ann_ids[a] for a in names], dtype=np.float64)
    order = np.argsort(ids)
    judged = set()
    for j, c in enumerate(criteria):
        ex, ann, value = _columns(
            s,
            select(store.Label.example_id, store.Label.annotator_id, store.Label.value)
            .join(store.Example, store.Example.id == store.Label.example_id)
            .where(store.Example.dataset_id == index.dataset_id, store.Label.criterion == c.key,
                   store.Label.annotator_id.in_([ann_ids[a] for a in names])),
            3,
        )
        if ex.size:
            judged.add(c.key)
            L[order[np.searchsorted(ids[order], ann)], index.rows_of(ex.astype(np.int64)), j] = value
    return {"L": L, "judged": np.asarray(sorted(judged), dtype=np.str_)}


def resolve_dataset(s: Session, name: str | None) -> store.Dataset:
    """The named dataset, or the only one in the workspace."""
    if name:
        return store.get_dataset(s, name)
    all_ = s.scalars(select(store.Dataset).order_by(store.Dataset.id)).all()
    if len(all_) == 1:
        return all_[0]
    if not all_:
        raise store.NotFound("no dataset in the workspace (see `judgekit import-dataset` or `judgekit demo`)")
    raise ValueError(f"several datasets ({', '.join(d.name for d in all_)}): pass --dataset NAME")


def load_annotator(
    s: Session, dataset: str | store.Dataset, name: str, criteria: Sequence[Criterion] | None = None
) -> Source:
    """One annotator's labels as a source (``annotator:NAME``)."""
    ds = dataset if isinstance(dataset, store.Dataset) else store.get_dataset(s, dataset)
    index = example_index(s, ds.id)
    names, crits, L, judged = label_tensor(s, index, criteria, [name])
    if not names:
        known = store.annotators_for_dataset(s, ds.id)
        raise store.NotFound(
            f"annotator {name!r} has no labels in dataset {ds.name!r} "
            f"(annotators: {', '.join(known) or 'none'})"
        )
    raw = L[0]
    return Source(
        key=f"annotator:{name}",
        kind="annotator",
        judge=f"human annotator {name}",
        criteria=crits,
        index=index,
        raw=raw,
        binary=stats.binarize(raw, _thresholds(crits)),
        judged=judged,
    )


def load_human(
    s: Session, dataset: str | store.Dataset, criteria: Sequence[Criterion] | None = None
) -> Source:
    """The human column: the majority of every annotator except ``reference``, ties unresolved (NaN).

    * Binary view: :func:`judgekit.labeling.settle` — the majority of the annotators' binary
      views (scale labels through ``pass_at``), a tie NaN (never a silent pass or fail), and where an
      ``adjudicator`` labelled a cell, the adjudicators settle it.
    * Raw view (scale metrics): :func:`stats.consensus_scale` (median) for scale criteria.
    * ``reference`` (the demo's planted truth) is left out whenever another annotator exists; when it is
      the only annotator the human column *is* ``reference`` and the source says ``human:reference``.
      The source key is ``human`` otherwise; ``judge`` names the annotators behind it.

    Raises ``NotFound`` when the dataset has no labels at all.
    """
    from judgekit import labeling

    ds = dataset if isinstance(dataset, store.Dataset) else store.get_dataset(s, dataset)
    index = example_index(s, ds.id)
    every = store.annotators_for_dataset(s, ds.id)
    if not every:
        raise store.NotFound(f"dataset {ds.name!r} has no human labels (see `judgekit import-labels`)")
    chosen = [a for a in every if a != REFERENCE_ANNOTATOR] or every
    names, crits, L, judged = label_tensor(s, index, criteria, chosen)
    roles = dict(s.execute(select(store.Annotator.name, store.Annotator.role)
                           .where(store.Annotator.name.in_(names))).all())
    binary = labeling.settle(L, [roles.get(n) or "annotator" for n in names], crits)
    scale = np.array([c.is_scale for c in crits], dtype=bool)
    raw = binary.copy()
    if scale.any() and names:
        raw[:, scale] = stats.consensus_scale(L[:, :, scale])
    if chosen == [REFERENCE_ANNOTATOR]:
        key, judge = "human:reference", "human: reference (the demo's planted truth)"
    elif len(chosen) == 1:
        key, judge = "human", f"human: {chosen[0]}"
    else:
        key, judge = "human", f"human consensus: majority of {', '.join(chosen)} (ties unresolved)"
    return Source(
        key=key, kind="human", judge=judge, criteria=crits, index=index, raw=raw, binary=binary, judged=judged
    )


def load_sources(
    s: Session,
    runs: Sequence[str] = (),
    *,
    human: bool = False,
    annotators: Sequence[str] = (),
    dataset: str | None = None,
) -> list[Source]:
    """Runs first, then the human column and annotators, on one shared dataset and criteria list.

    Human sources are built on the runs' criteria (union, in order) so their columns line up; with no
    run they cover every labelled criterion of the dataset (``--dataset`` or the only dataset).
    """
    sources = [load_run(s, r) for r in runs]
    datasets = {src.index.dataset_id: src.index.dataset for src in sources}
    if len(datasets) > 1:
        raise ValueError(
            f"the runs belong to different datasets ({', '.join(sorted(datasets.values()))}); "
            "a report compares sources on one dataset"
        )
    if sources:
        ds = s.get(store.Dataset, sources[0].index.dataset_id)
        if dataset and ds.name != dataset:
            raise ValueError(f"run {sources[0].key} belongs to dataset {ds.name!r}, not {dataset!r}")
    elif human or annotators:
        ds = resolve_dataset(s, dataset)
    else:
        raise ValueError("choose at least one source: --run NAME, --human or --annotator NAME")
    keys = _union_keys(sources)
    crits: tuple[Criterion, ...] | None = None
    if sources:
        by_key = {c.key: c for src in sources for c in src.criteria}
        crits = tuple(by_key[k] for k in keys)
    if human:
        sources.append(load_human(s, ds, crits))
    for a in annotators:
        sources.append(load_annotator(s, ds, a, crits))
    keys = _union_keys(sources)
    return [src.select(keys) for src in sources]


def _union_keys(sources: Sequence[Source]) -> list[str]:
    """Criteria of every source, in order, without those nobody judged (unless nobody judged anything)."""
    every = list(dict.fromkeys(k for src in sources for k in src.keys))
    return [k for k in every if any(k in src.judged for src in sources)] or every


# --------------------------------------------------------------------------------------------- crosstab


@dataclass(frozen=True, eq=False)
class CrosstabReport:
    """Seed 003's table for one criterion pair under one source, with example ids per cell."""

    row: str
    col: str
    source: str
    judge: str
    table: stats.Crosstab
    cells: dict[str, dict[str, list[str]]]
    message: str | None = None

    def to_dict(self) -> dict:
        t = self.table
        return {
            "row": self.row,
            "col": self.col,
            "n": t.n,
            "counts": {
                r: {c: int(t.counts[i, j]) for j, c in enumerate(OUTCOMES)} for i, r in enumerate(OUTCOMES)
            },
            "row_totals": {r: int(t.row_totals[i]) for i, r in enumerate(OUTCOMES)},
            "col_fail_rate": {r: _round(t.col_fail_rate[i], 4) for i, r in enumerate(OUTCOMES)},
            "ratio": _round(t.ratio, 2),
            "phi": _round(t.phi, 3),
            "source": self.source,
            "judge": self.judge,
            "cells": self.cells,
            "message": self.message,
        }

    def to_frame(self):
        """The 2×2 table as a pandas frame (counts, row totals, column failure rate per row)."""
        from judgekit import figures

        return figures.crosstab_table(self, formatted=False)

    def figure(self):
        """The 2×2 counts as a plotly heatmap."""
        from judgekit import figures

        return figures.crosstab_figure(self)


def crosstab_report(source: Source, row: str, col: str) -> CrosstabReport:
    """Cross-tabulate criteria ``row`` × ``col`` under ``source`` (binary view, rows where both scored)."""
    if row == col:
        raise ValueError(f"--row and --col name the same criterion {row!r}")
    i, j = source.col(row), source.col(col)
    t = stats.crosstab(source.binary[:, i], source.binary[:, j])
    cells = {r: {c: source.index.ext_ids(t.cell(r, c)) for c in OUTCOMES} for r in OUTCOMES}
    message = None
    if t.n == 0:
        message = f"no example has both {row} and {col} scored under {source.key}: nothing to cross-tabulate"
    elif math.isnan(t.phi):
        constant = [k for k, tot in ((row, t.row_totals), (col, t.col_totals)) if (tot == 0).any()]
        message = f"{' and '.join(constant)} constant under {source.key}: phi undefined"
    return CrosstabReport(row, col, source.key, source.judge, t, cells, message)


def render_crosstab_table(report: CrosstabReport) -> str:
    """The seed's layout: counts, row totals in parentheses, column failure rate within each row."""
    d = report.to_dict()
    t = report.table
    width = max(len(report.row), 6)
    lines = [
        f"{report.source}  ({report.judge})",
        f"{'':{width + 7}}{report.col}",
        f"{'':{width + 7}}{'pass':>8} {'fail':>8}",
    ]
    for i, r in enumerate(OUTCOMES):
        label = f"{report.row if i == 0 else '':<{width}}  {r:<4}"
        rate = t.col_fail_rate[i]
        rate_s = "—" if math.isnan(rate) else f"{rate:.1%}"
        lines.append(
            f"{label} {t.counts[i, 0]:>8} {t.counts[i, 1]:>8}   ({t.row_totals[i]})   "
            f"{report.col} fails: {rate_s}"
        )
    ratio = "—" if d["ratio"] is None or math.isnan(d["ratio"]) else f"{d['ratio']:.2f}"
    ph = "—" if math.isnan(t.phi) else f"{t.phi:.3f}"
    lines.append(f"n {t.n}   ratio {ratio}   phi {ph}")
    if report.message:
        lines.append(f"note: {report.message}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- phi


@dataclass(frozen=True, eq=False)
class PhiColumn:
    """One source's phi matrix with bootstrap CIs and the reasons behind every undefined entry."""

    source: str
    judge: str
    kind: SourceKind
    n: int
    phi: NDArray[np.float64]
    n_matrix: NDArray[np.int64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    notes: list[str]
    criterion_notes: dict[str, str]

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "judge": self.judge,
            "n": self.n,
            "matrix": self.phi,
            "n_matrix": self.n_matrix,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "notes": self.notes,
            "criterion_notes": self.criterion_notes,
        }


class AuditRow(NamedTuple):
    """The association audit of one criterion pair: phi and CI per source, and the verdict."""

    a: str
    b: str
    values: dict[str, tuple[float, float, float]]
    verdict: str
    induced_by: list[str]
    note: str

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "values": {k: {"phi": v[0], "lo": v[1], "hi": v[2]} for k, v in self.values.items()},
            "verdict": self.verdict,
            "induced_by": self.induced_by,
            "note": self.note,
        }


@dataclass(frozen=True, eq=False)
class PhiReport:
    criteria: list[str]
    columns: list[PhiColumn]
    audit: list[AuditRow]
    human: str | None
    n_boot: int

    def to_dict(self) -> dict:
        return {
            "criteria": self.criteria,
            "columns": [c.to_dict() for c in self.columns],
            "audit": [a.to_dict() for a in self.audit],
            "human": self.human,
            "n_boot": self.n_boot,
        }

    def column(self, source: str) -> PhiColumn:
        for c in self.columns:
            if c.source == source:
                return c
        raise KeyError(source)

    def to_frame(self):
        """One row per source and criterion pair: phi, CI, n and the audit's verdict (pandas)."""
        from judgekit import figures

        return figures.phi_frame(self)

    def figure(self, source: str | None = None):
        """The phi heatmap of ``source``, or of every source side by side (plotly)."""
        from judgekit import figures

        return figures.phi_figure(self, source)


def undefined_phi_notes(src: Source, name: str | None = None) -> dict[str, str]:
    """Why a criterion's phi is undefined under a source, one sentence per criterion key — what the CLI,
    the HTML report and the dashboard show where the number would be ("every verdict of cites_source
    under run X is pass (120 of 120): phi is undefined"). ``name`` names the source (default its key)."""
    name = name or src.key
    notes = {}
    B = src.binary[src.covered]
    for j, key in enumerate(src.keys):
        col = B[:, j]
        scored = col[~np.isnan(col)]
        if key in src.missing:
            notes[key] = f"{key} is not a criterion of {name}: phi is undefined"
        elif scored.size == 0:
            notes[key] = f"{key} has no scored {src.noun} under {name}: phi is undefined"
        elif np.all(scored == scored[0]):
            outcome = "pass" if scored[0] == 1.0 else "fail"
            notes[key] = (f"every {src.noun} of {key} under {name} is {outcome} ({scored.size} of {scored.size}): "
                          "phi is undefined")
    return notes


def phi_column(src: Source, n_boot: int = 1000, seed: int = 0) -> PhiColumn:
    """Phi matrix and percentile-bootstrap CIs over the examples the source covers."""
    V = src.binary[src.covered]
    pm = stats.phi_matrix(V)
    ci = stats.phi_bootstrap_ci(V, n_boot=n_boot, seed=seed)
    crit_notes = undefined_phi_notes(src)
    notes = list(crit_notes.values())
    if src.n == 0:
        notes.insert(0, f"{src.key} has no scored {src.noun}s: every phi is undefined")
    return PhiColumn(src.key, src.judge, src.kind, src.n, pm.phi, pm.n, ci.lo, ci.hi, notes, crit_notes)


def _human_column(columns: Sequence[PhiColumn]) -> PhiColumn | None:
    return next((c for c in columns if c.kind == "human"), None) or next(
        (c for c in columns if c.kind == "annotator"), None
    )


def association_audit(columns: Sequence[PhiColumn], criteria: Sequence[str]) -> list[AuditRow]:
    """For every criterion pair: phi and CI under each run and the human column, and whether the
    association is real, induced by a harness, or undecided (:func:`stats.association_audit`).

    The human column is the ``human`` source if present, else the first annotator; other annotator
    columns are not harnesses and stay out of the verdict. Without a human column every verdict is
    ``"no human column"``.
    """
    human = _human_column(columns)
    used = [c for c in columns if c.kind == "run" or c is human]
    human_key = human.source if human else "human"
    out = []
    for i, j in itertools.combinations(range(len(criteria)), 2):
        values = {c.source: (float(c.phi[i, j]), float(c.ci_low[i, j]), float(c.ci_high[i, j])) for c in used}
        v = stats.association_audit(values, human_key)
        out.append(AuditRow(criteria[i], criteria[j], values, v.verdict, list(v.induced_by), v.note))
    return out


def phi_report(sources: Sequence[Source], n_boot: int = 1000, seed: int = 0) -> PhiReport:
    """Phi matrices (with CIs) of every source on one criteria list, plus the association audit."""
    keys = _union_keys(sources)
    sources = [src.select(keys) for src in sources]
    columns = [phi_column(src, n_boot=n_boot, seed=seed) for src in sources]
    human = _human_column(columns)
    return PhiReport(keys, columns, association_audit(columns, keys), human.source if human else None, n_boot)


def _f(x: float, fmt: str = ".2f") -> str:
    return "—" if x is None or not math.isfinite(float(x)) else format(float(x), fmt)


def render_phi_table(report: PhiReport) -> str:
    keys = report.criteria
    w = max([len(k) for k in keys] + [8])
    out = []
    for c in report.columns:
        out.append(f"{c.source}  ({c.judge})  n={c.n}")
        out.append(f"{'':{w}} " + " ".join(f"{k[:8]:>8}" for k in keys))
        for i, k in enumerate(keys):
            out.append(f"{k:<{w}} " + " ".join(f"{_f(c.phi[i, j]):>8}" for j in range(len(keys))))
        out += [f"  note: {n}" for n in c.notes]
        out.append("")
    if report.audit:
        out.append("association audit" + ("" if report.human else " (no human column)"))
        for a in report.audit:
            vals = "  ".join(f"{k} {_f(v[0])} [{_f(v[1])}, {_f(v[2])}]" for k, v in a.values.items())
            blame = f" by {', '.join(a.induced_by)}" if a.induced_by else ""
            out.append(f"  {a.a} × {a.b}: {a.verdict}{blame}   {vals}")
    return "\n".join(out).rstrip()


# ------------------------------------------------------------------------------------------- prices and cost


class Price(NamedTuple):
    """USD per one million tokens."""

    input: float
    cached_input: float
    output: float


DEFAULT_PRICES: dict[str, Price] = {
    # Published list prices (USD / 1M tokens) at the time of writing; override in <home>/prices.yaml.
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
}
FREE_JUDGE_KINDS = frozenset({"simulated", "local", "imported"})
PRICES_FILE = "prices.yaml"


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """The price table: built-in defaults overlaid with ``prices.yaml`` in the workspace home if present.

    File format (USD per 1M tokens; ``cached_input`` defaults to ``input``)::

        gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.60}
        my-vllm-model: {input: 0, output: 0}
    """
    import yaml

    prices = dict(DEFAULT_PRICES)
    path = Path(path) if path else config.home() / PRICES_FILE
    if not path.is_file():
        return prices
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: invalid YAML ({e.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping of model name → {{input, cached_input, output}}")
    for model, entry in doc.items():
        try:
            inp = float(entry["input"])
            prices[str(model)] = Price(inp, float(entry.get("cached_input", inp)), float(entry["output"]))
        except (TypeError, KeyError, ValueError, AttributeError):
            raise ValueError(
                f"{path}: field {model!r}: needs numeric input and output "
                "(USD per 1M tokens; cached_input optional)"
            ) from None
    return prices


def _price_for(model: str | None, prices: dict[str, Price]) -> Price | None:
    """Exact name, else the longest table name the model extends (``gpt-4o-2024-08-06``, ``x/gpt-4o``)."""
    if not model:
        return None
    name = model.split("/")[-1]
    for candidate in (model, name):
        if candidate in prices:
            return prices[candidate]
    for key in sorted(prices, key=len, reverse=True):
        if name.startswith(key + "-"):
            return prices[key]
    return None


def price_calls(
    model: str | None, prompt: int, cached: int, completion: int, prices: dict[str, Price] | None = None
) -> float | None:
    """USD for token totals; cached prompt tokens are billed at the cached rate. ``None`` if unknown model."""
    price = _price_for(model, load_prices() if prices is None else prices)
    if price is None:
        return None
    cached = min(cached or 0, prompt or 0)
    uncached = (prompt or 0) - cached
    return (uncached * price.input + cached * price.cached_input + (completion or 0) * price.output) / 1e6


@dataclass(frozen=True)
class CostSummary:
    """What a run cost: calls and tokens (from ``calls`` rows, summed in SQL), latency, wall time, money."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_p50: float | None
    latency_p95: float | None
    wall_s: float
    retries: int
    failed_calls: int
    usd: float | None
    model: str | None = None
    note: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_cost(s: Session, run: store.Run, prices: dict[str, Price] | None = None) -> CostSummary:
    C = store.Call
    calls, prompt, completion, cached, retries, failed = s.execute(
        select(
            func.count(C.id),
            func.coalesce(func.sum(C.prompt_tokens), 0),
            func.coalesce(func.sum(C.completion_tokens), 0),
            func.coalesce(func.sum(C.cached_tokens), 0),
            func.coalesce(func.sum(C.attempts - 1), 0),
            func.coalesce(func.sum(case((C.status != "ok", 1), else_=0)), 0),
        ).where(C.run_id == run.id)
    ).one()
    (lat,) = _columns(s, select(C.latency_s).where(C.run_id == run.id, C.latency_s.is_not(None)), 1)
    p50, p95 = (float(x) for x in np.percentile(lat, [50, 95])) if lat.size else (None, None)
    judge = s.get(store.Judge, run.judge_id)
    note = None
    if judge is not None and judge.kind in FREE_JUDGE_KINDS:
        usd: float | None = 0.0
        if judge.kind == "imported" and not calls:
            note = "imported run: no calls recorded"
    else:
        usd = price_calls(judge.model if judge else None, int(prompt), int(cached), int(completion), prices)
        if usd is None:
            note = (
                f"no price for model {judge.model if judge else None!r}: add it to "
                f"{config.home() / PRICES_FILE}"
            )
    return CostSummary(
        int(calls),
        int(prompt),
        int(completion),
        int(cached),
        p50,
        p95,
        float(run.wall_s or 0.0),
        int(retries),
        int(failed),
        usd,
        judge.model if judge else None,
        note,
    )


# --------------------------------------------------------------------------------------------- compare


@dataclass(frozen=True, eq=False)
class CompareReport:
    """Two runs on the examples both judged: flips per criterion, attribution, all-pass rate, cost."""

    a: str
    b: str
    judge_a: str
    judge_b: str
    n: int
    flips: dict[str, stats.CriterionFlip]
    flip_ids: dict[str, tuple[list[str], list[str]]]
    all_pass_rate: tuple[float, float]
    attribution: tuple[dict[str, int], dict[str, int]]
    cost: tuple[CostSummary, CostSummary]
    message: str | None = None

    def to_dict(self) -> dict:
        crits = {}
        for k, f in self.flips.items():
            f2p, p2f = self.flip_ids[k]
            crits[k] = {
                "n": f.n,
                "a_fail": f.a_fail,
                "b_fail": f.b_fail,
                "fail_to_pass": f.fail_to_pass,
                "pass_to_fail": f.pass_to_fail,
                "mcnemar_p": f.mcnemar_p if f.n else math.nan,
                "fail_to_pass_ids": f2p,
                "pass_to_fail_ids": p2f,
            }
        return {
            "a": self.a,
            "b": self.b,
            "judge": {"a": self.judge_a, "b": self.judge_b},
            "n": self.n,
            "criteria": crits,
            "all_pass_rate": {"a": self.all_pass_rate[0], "b": self.all_pass_rate[1]},
            "attribution": {"a": self.attribution[0], "b": self.attribution[1]},
            "cost": {"a": self.cost[0].to_dict(), "b": self.cost[1].to_dict()},
            "message": self.message,
        }

    def to_frame(self):
        """Flips per criterion with the exact McNemar p (pandas)."""
        from judgekit import figures

        return figures.flips_frame(self, formatted=False)

    def figure(self):
        """Failures attributed to each criterion under A and B (plotly)."""
        from judgekit import figures

        return figures.attribution_figure(self, (self.a, self.b))


def compare_runs(
    s: Session, run_a: str | int, run_b: str | int, prices: dict[str, Price] | None = None
) -> CompareReport:
    """Compare two runs of one dataset on the examples both scored (criteria both rubrics share)."""
    return compare_sources(s, load_run(s, run_a), load_run(s, run_b), prices)


def compare_sources(
    s: Session, A: Source, B: Source, prices: dict[str, Price] | None = None
) -> CompareReport:
    """:func:`compare_runs` on already loaded run sources."""
    if A.index.dataset_id != B.index.dataset_id:
        raise ValueError(
            f"{A.key} and {B.key} belong to different datasets ({A.index.dataset}, {B.index.dataset})"
        )
    if A.key == B.key:
        raise ValueError(f"compare needs two different runs, got {A.key} twice")
    keys = [k for k in A.keys if k in A.judged and k in B.judged]
    A, B = A.select(keys), B.select(keys)
    both = A.covered & B.covered
    rows = np.flatnonzero(both)
    VA, VB = A.binary[rows], B.binary[rows]
    flips = {k: f for k, f in zip(keys, stats.compare(VA, VB), strict=True)}
    ext = A.index.ext[rows]
    flip_ids = {
        k: ([str(e) for e in ext[f.fail_to_pass_rows]], [str(e) for e in ext[f.pass_to_fail_rows]])
        for k, f in flips.items()
    }
    attribution = tuple(
        {k: int(v) for k, v in zip(keys, stats.failure_attribution(V), strict=True)} for V in (VA, VB)
    )
    prices = load_prices() if prices is None else prices
    runs = [s.get(store.Run, src.run_id) for src in (A, B)]
    message = None
    if not keys:
        message = f"{A.key} and {B.key} share no judged criterion: nothing to compare"
    elif rows.size == 0:
        message = f"{A.key} and {B.key} have no scored example in common: nothing to compare"
    return CompareReport(
        A.key,
        B.key,
        A.judge,
        B.judge,
        int(rows.size),
        flips,
        flip_ids,
        (stats.all_pass_rate(VA), stats.all_pass_rate(VB)),
        attribution,  # type: ignore[arg-type]
        (run_cost(s, runs[0], prices), run_cost(s, runs[1], prices)),
        message,
    )


def render_compare_table(report: CompareReport) -> str:
    out = [
        f"a = {report.a}  ({report.judge_a})",
        f"b = {report.b}  ({report.judge_b})",
        f"n = {report.n} examples both judged",
        "",
    ]
    w = max([len(k) for k in report.flips] + [9])
    out.append(
        f"{'criterion':<{w}} {'a_fail':>7} {'b_fail':>7} {'fail→pass':>10} {'pass→fail':>10} "
        f"{'McNemar p':>10}"
    )
    for k, f in report.flips.items():
        p = _f(f.mcnemar_p if f.n else math.nan, ".3g")
        out.append(f"{k:<{w}} {f.a_fail:>7} {f.b_fail:>7} {f.fail_to_pass:>10} {f.pass_to_fail:>10} {p:>10}")
    ra, rb = report.all_pass_rate
    out += [
        "",
        f"all-pass rate   a {_f(ra, '.1%')}   b {_f(rb, '.1%')}",
        "",
        f"{'cost':<18} {'a':>14} {'b':>14}",
    ]
    ca, cb = report.cost
    for fld, fmt in (
        ("calls", "d"),
        ("prompt_tokens", "d"),
        ("completion_tokens", "d"),
        ("cached_tokens", "d"),
        ("retries", "d"),
        ("failed_calls", "d"),
        ("latency_p50", ".2f"),
        ("latency_p95", ".2f"),
        ("wall_s", ".1f"),
        ("usd", ".4f"),
    ):
        va, vb = getattr(ca, fld), getattr(cb, fld)
        out.append(f"{fld:<18} {_num(va, fmt):>14} {_num(vb, fmt):>14}")
    for side, c in (("a", ca), ("b", cb)):
        if c.note:
            out.append(f"note ({side}): {c.note}")
    if report.message:
        out.append(f"note: {report.message}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- agreement


@dataclass(frozen=True, eq=False)
class AgreementReport:
    """Agreement of a judge (or another run) with a reference column, per criterion."""

    source: str
    judge: str
    human: str
    human_judge: str
    criteria: dict[str, dict[str, Any]]
    message: str | None = None
    annotators: AnnotatorAgreement | None = None

    def to_dict(self) -> dict:
        out = {
            "source": self.source,
            "judge": self.judge,
            "human": self.human,
            "human_judge": self.human_judge,
            "criteria": self.criteria,
            "message": self.message,
        }
        if self.annotators is not None:
            out["annotators"] = self.annotators.to_dict()
        return out

    def to_frame(self):
        """Per criterion: n, accuracy, κ and its CI, TPR/TNR, prevalence, AUC (pandas; NaN = undefined)."""
        from judgekit import figures

        return figures.agreement_frame(self, formatted=False)

    def figure(self):
        """κ per criterion with its 95% CI (plotly)."""
        from judgekit import figures

        return figures.kappa_figure(self, f"{self.source} vs {self.human}: Cohen's κ")


def agreement_report(judge: Source, human: Source) -> AgreementReport:
    """Per criterion: n, accuracy, Cohen's κ with CI, TPR/TNR (fail = positive), prevalence, AUC of
    P(pass) where the judge recorded it; for scale criteria also mean |Δ|, quadratic weighted κ and
    Spearman on the raw 1–5 scores. Rows where either side is missing are left out, per criterion."""
    keys = judge.keys
    J, H = judge.select(keys), human.select(keys)
    m = stats.agreement_matrix(J.binary, H.binary, J.p_pass)
    crits: dict[str, dict[str, Any]] = {}
    for j, c in enumerate(J.criteria):
        entry: dict[str, Any] = {
            "kind": c.kind,
            "n": int(m.n[j]),
            "accuracy": float(m.accuracy[j]),
            "kappa": float(m.kappa[j]),
            "kappa_ci": [float(m.kappa_lo[j]), float(m.kappa_hi[j])],
            "tpr": float(m.tpr[j]),
            "tnr": float(m.tnr[j]),
            "prevalence": float(m.prevalence[j]),
            "auc": float(m.auc[j]),
            "n_auc": int(m.n_auc[j]),
            "counts": {
                "human_pass": {"judge_pass": int(m.counts[j, 0, 0]), "judge_fail": int(m.counts[j, 0, 1])},
                "human_fail": {"judge_pass": int(m.counts[j, 1, 0]), "judge_fail": int(m.counts[j, 1, 1])},
            },
        }
        if c.is_scale:
            a, b = J.raw[:, j], H.raw[:, j]
            entry |= {
                "mean_abs_delta": stats.mean_abs_delta(a, b),
                "weighted_kappa": stats.weighted_kappa(a, b),
                "spearman": stats.spearman(a, b),
            }
        crits[c.key] = entry
    message = None
    if all(e["n"] == 0 for e in crits.values()):
        message = f"no example is scored under both {judge.key} and {human.key}: agreement undefined"
    return AgreementReport(judge.key, judge.judge, human.key, human.judge, crits, message)


def agreement_for(
    s: Session, run: str | int, *, annotator: str | None = None, vs_run: str | int | None = None
) -> AgreementReport:
    """A run's agreement with one annotator, another run (``vs_run``, which plays the reference), or by
    default the human consensus — then with the annotators' own agreement attached when there are two
    or more. What ``judgekit report agreement``, ``judgekit check`` and ``Workspace.agreement`` show."""
    if annotator and vs_run:
        raise ValueError("--annotator and --vs-run together: choose one reference column")
    if vs_run:
        return judge_vs_judge(s, vs_run, run)
    judge = load_run(s, run)
    ds = s.get(store.Dataset, judge.index.dataset_id)
    if annotator:
        return agreement_report(judge, load_annotator(s, ds, annotator, judge.criteria))
    rep = agreement_report(judge, load_human(s, ds, judge.criteria))
    ann = annotator_agreement(s, ds)
    return rep if ann is None else replace(rep, annotators=ann)


def judge_vs_judge(s: Session, run_a: str | int, run_b: str | int) -> AgreementReport:
    """κ and friends between two runs; ``run_a`` plays the reference (TPR/TNR are relative to it)."""
    A, B = load_run(s, run_a), load_run(s, run_b)
    if A.index.dataset_id != B.index.dataset_id:
        raise ValueError(f"{A.key} and {B.key} belong to different datasets")
    keys = [k for k in B.keys if k in set(A.keys)]
    return agreement_report(B.select(keys), A.select(keys))


@dataclass(frozen=True, eq=False)
class AnnotatorAgreement:
    """Inter-annotator reliability: pairwise Cohen's κ and Krippendorff's α per criterion."""

    dataset: str
    annotators: list[str]
    criteria: dict[str, dict[str, Any]]

    def to_dict(self) -> dict:
        return {"dataset": self.dataset, "annotators": self.annotators, "criteria": self.criteria}


def annotator_agreement(
    s: Session, dataset: str | store.Dataset, *, include_reference: bool = False
) -> AnnotatorAgreement | None:
    """κ for every annotator pair and Krippendorff's α (nominal for binary, ordinal for scale criteria)
    per criterion; ``None`` with fewer than two annotators. ``reference`` is left out by default."""
    ds = dataset if isinstance(dataset, store.Dataset) else store.get_dataset(s, dataset)
    names = [
        a for a in store.annotators_for_dataset(s, ds.id) if include_reference or a != REFERENCE_ANNOTATOR
    ]
    if len(names) < 2:
        return None
    index = example_index(s, ds.id)
    names, crits, L, _ = label_tensor(s, index, None, names)
    B = stats.binarize(L, _thresholds(crits))
    out: dict[str, dict[str, Any]] = {}
    for j, c in enumerate(crits):
        pairs = []
        for x, y in itertools.combinations(range(len(names)), 2):
            m = stats.agreement(B[x, :, j], B[y, :, j])
            pair = {"a": names[x], "b": names[y], "n": m.n, "kappa": m.kappa}
            if c.is_scale:
                pair["weighted_kappa"] = stats.weighted_kappa(L[x, :, j], L[y, :, j])
            pairs.append(pair)
        labelled = ~np.isnan(L[:, :, j]).all(axis=0)
        alpha = stats.krippendorff_alpha(L[:, labelled, j], level="ordinal" if c.is_scale else "nominal")
        out[c.key] = {"kind": c.kind, "alpha": alpha, "n_units": int(labelled.sum()), "pairs": pairs}
    return AnnotatorAgreement(ds.name, names, out)


def render_agreement_table(report: AgreementReport) -> str:
    out = [f"judge  {report.source}  ({report.judge})", f"human  {report.human}  ({report.human_judge})", ""]
    w = max([len(k) for k in report.criteria] + [9])
    out.append(
        f"{'criterion':<{w}} {'n':>5} {'acc':>6} {'kappa':>6} {'95% CI':>15} {'TPR':>6} {'TNR':>6} "
        f"{'prev':>6} {'AUC':>6} {'|Δ|':>6} {'wκ':>6} {'ρ':>6}"
    )
    for k, e in report.criteria.items():
        ci = f"[{_f(e['kappa_ci'][0])}, {_f(e['kappa_ci'][1])}]"
        out.append(
            f"{k:<{w}} {e['n']:>5} {_f(e['accuracy']):>6} {_f(e['kappa']):>6} {ci:>15} {_f(e['tpr']):>6} "
            f"{_f(e['tnr']):>6} {_f(e['prevalence']):>6} {_f(e['auc']):>6} "
            f"{_f(e.get('mean_abs_delta', math.nan)):>6} {_f(e.get('weighted_kappa', math.nan)):>6} "
            f"{_f(e.get('spearman', math.nan)):>6}"
        )
    if report.annotators is not None:
        out += ["", f"annotators: {', '.join(report.annotators.annotators)}"]
        for k, e in report.annotators.criteria.items():
            kappas = ", ".join(f"{p['a']}/{p['b']} κ {_f(p['kappa'])} (n {p['n']})" for p in e["pairs"])
            out.append(f"  {k}: α {_f(e['alpha'])} over {e['n_units']} examples; {kappas}")
    if report.message:
        out.append(f"note: {report.message}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- runs


def runs_report(s: Session, dataset: str | None = None) -> list[dict]:
    rows = store.list_runs(s)
    return [r for r in rows if dataset is None or r["dataset"] == dataset]


def render_runs_table(rows: Sequence[dict]) -> str:
    if not rows:
        return "no runs (see `judgekit run` or `judgekit import-run`)"
    out = [f"{'id':>4}  {'name':<24} {'dataset':<14} {'status':<9} {'harness':<28} {'scored':>13}  judge"]
    for r in rows:
        out.append(
            f"{r['id']:>4}  {r['name']:<24} {r['dataset']:<14} {r['status']:<9} {r['harness']:<28} "
            f"{str(r['scored']) + '/' + str(r['verdicts']):>13}  {r['judge']}"
        )
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- full report


@dataclass(frozen=True, eq=False)
class Report:
    """Everything the exported report shows; render with :func:`render_html` or :func:`render_markdown`."""

    dataset: str
    sources: list[dict[str, Any]]
    phi: PhiReport
    crosstabs: list[CrosstabReport]
    compares: list[CompareReport]
    agreements: list[AgreementReport]
    examples: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "sources": self.sources,
            "phi": self.phi.to_dict(),
            "crosstabs": [c.to_dict() for c in self.crosstabs],
            "compare": [c.to_dict() for c in self.compares],
            "agreement": [a.to_dict() for a in self.agreements],
            "notes": self.notes,
        }


def _default_dataset(s: Session) -> store.Dataset:
    """The dataset with the most runs (ties: the oldest)."""
    row = s.execute(
        select(store.Run.dataset_id, func.count().label("n"))
        .group_by(store.Run.dataset_id)
        .order_by(func.count().desc(), store.Run.dataset_id)
        .limit(1)
    ).first()
    if row is None:
        return resolve_dataset(s, None)
    return s.get(store.Dataset, row[0])


def _shifted_pairs(phi: PhiReport, top: int) -> list[tuple[int, int]]:
    """Criterion pairs whose phi moves most between runs (max |phi_a − phi_b|); one run: largest |phi|."""
    runs = [c for c in phi.columns if c.kind == "run"]
    k = len(phi.criteria)
    pairs = list(itertools.combinations(range(k), 2))
    if not runs or not pairs:
        return []
    P = np.stack([[c.phi[i, j] for i, j in pairs] for c in runs])  # (runs, pairs)
    with np.errstate(invalid="ignore"):
        if len(runs) > 1:
            score = np.nanmax(P, axis=0) - np.nanmin(P, axis=0) if np.isfinite(P).any() else P[0]
        else:
            score = np.abs(P[0])
    score = np.where(np.isfinite(score), score, -1.0)
    order = np.argsort(-score, kind="stable")
    return [pairs[o] for o in order[:top] if score[o] >= 0]


def build_report(
    s: Session,
    runs: Sequence[str] | None = None,
    *,
    human: bool = True,
    dataset: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    top_pairs: int = 3,
    examples_per_cell: int = 3,
) -> Report:
    """Assemble the exported report.

    Default sources: every run of ``dataset`` (else of the dataset with the most runs) plus the human
    column when the dataset has labels. Shows crosstabs of the ``top_pairs`` most-shifted criterion pairs
    under every source, the phi matrices and audit, each run compared with the first, and each run's
    agreement with the human column; a few examples of the off-diagonal crosstab cells and of flips are
    included with their text (escaped by the renderers).
    """
    notes: list[str] = []
    if runs:
        run_names = list(runs)
    else:
        ds = store.get_dataset(s, dataset) if dataset else _default_dataset(s)
        dataset = ds.name
        run_names = [
            r.name
            for r in s.scalars(select(store.Run).where(store.Run.dataset_id == ds.id).order_by(store.Run.id))
        ]
        if not run_names:
            notes.append(f"dataset {ds.name!r} has no runs")
    base = load_sources(s, run_names, dataset=dataset) if run_names else []
    ds_name = base[0].index.dataset if base else resolve_dataset(s, dataset).name
    ds_row = store.get_dataset(s, ds_name)
    sources = list(base)
    if human:
        if store.annotators_for_dataset(s, ds_row.id):
            crits = None
            if base:
                by_key = {c.key: c for src in base for c in src.criteria}
                crits = tuple(by_key[k] for k in _union_keys(base))
            sources.append(load_human(s, ds_row, crits))
        else:
            notes.append(f"dataset {ds_name!r} has no human labels: no human column")
    if not sources:
        raise ValueError(f"nothing to report for dataset {ds_name!r}: no runs and no labels")
    keys = _union_keys(sources)
    sources = [src.select(keys) for src in sources]
    phi = phi_report(sources, n_boot=n_boot, seed=seed)
    crosstabs = [
        crosstab_report(src, keys[i], keys[j]) for i, j in _shifted_pairs(phi, top_pairs) for src in sources
    ]
    runs_ = [src for src in sources if src.kind == "run"]
    prices = load_prices()
    compares = [compare_sources(s, runs_[0], other, prices) for other in runs_[1:]]
    hum = next((src for src in sources if src.is_human), None)
    agreements = [agreement_report(r, hum) for r in runs_] if hum is not None else []
    wanted: list[str] = []
    for ct in crosstabs:
        for r, c in (("pass", "fail"), ("fail", "pass")):
            wanted += ct.cells[r][c][:examples_per_cell]
    for cmp in compares:
        if cmp.flips:
            top = max(cmp.flips, key=lambda k: cmp.flips[k].fail_to_pass + cmp.flips[k].pass_to_fail)
            wanted += cmp.flip_ids[top][0][:examples_per_cell] + cmp.flip_ids[top][1][:examples_per_cell]
    examples = _example_texts(s, ds_row.id, list(dict.fromkeys(wanted)))
    source_rows = [{"source": src.key, "judge": src.judge, "n": src.n} for src in sources]
    return Report(ds_name, source_rows, phi, crosstabs, compares, agreements, examples, notes)


def _example_texts(s: Session, dataset_id: int, ext_ids: list[str]) -> dict[str, dict[str, str]]:
    if not ext_ids:
        return {}
    rows = s.execute(
        select(store.Example.ext_id, store.Example.question, store.Example.answer).where(
            store.Example.dataset_id == dataset_id, store.Example.ext_id.in_(ext_ids)
        )
    ).all()
    return {e: {"question": q or "", "answer": a or ""} for e, q, a in rows}


# --------------------------------------------------------------------------------------------- rendering


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _clip(text: str, n: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _num(x: Any, fmt: str = ".2f") -> str:
    """A count as an integer, anything else through ``fmt``; ``—`` for missing values."""
    if x is None:
        return "—"
    if isinstance(x, int | np.integer) and not isinstance(x, bool):
        return str(int(x))
    return _f(x, ".2f" if fmt == "d" else fmt)


def _sections(report: Report) -> list[tuple[str, list[str], list[list[Any]], str | None]]:
    """The report's tables as (title, header, rows, caption): shared by the HTML and Markdown renderers."""
    out = []
    out.append(
        (
            "Sources",
            ["source", "judge", "n"],
            [[r["source"], r["judge"], r["n"]] for r in report.sources],
            None,
        )
    )
    keys = report.phi.criteria
    for c in report.phi.columns:
        rows = [[k] + [_f(c.phi[i, j]) for j in range(len(keys))] for i, k in enumerate(keys)]
        out.append(
            (
                f"Phi — {c.source}",
                ["criterion"] + keys,
                rows,
                f"judge: {c.judge}; n = {c.n}" + ("; " + "; ".join(c.notes) if c.notes else ""),
            )
        )
    if report.phi.audit:
        srcs = list(report.phi.audit[0].values)
        rows = [
            [a.a, a.b]
            + [f"{_f(a.values[k][0])} [{_f(a.values[k][1])}, {_f(a.values[k][2])}]" for k in srcs]
            + [a.verdict + (f" ({', '.join(a.induced_by)})" if a.induced_by else ""), a.note]
            for a in report.phi.audit
        ]
        out.append(
            (
                "Association audit",
                ["a", "b"] + srcs + ["verdict", "note"],
                rows,
                f"human column: {report.phi.human or 'none'}; "
                f"95% bootstrap CIs, {report.phi.n_boot} replicates",
            )
        )
    for ct in report.crosstabs:
        t = ct.table
        rows = [
            [
                f"{ct.row} {r}",
                int(t.counts[i, 0]),
                int(t.counts[i, 1]),
                int(t.row_totals[i]),
                _f(t.col_fail_rate[i], ".1%"),
            ]
            for i, r in enumerate(OUTCOMES)
        ]
        out.append(
            (
                f"Crosstab {ct.row} × {ct.col} — {ct.source}",
                ["", f"{ct.col} pass", f"{ct.col} fail", "row total", f"{ct.col} fail rate"],
                rows,
                f"judge: {ct.judge}; n = {t.n}; ratio {_f(t.ratio)}; phi {_f(t.phi, '.3f')}"
                + (f"; {ct.message}" if ct.message else ""),
            )
        )
    for cmp in report.compares:
        rows = [
            [k, f.n, f.a_fail, f.b_fail, f.fail_to_pass, f.pass_to_fail, _f(f.mcnemar_p, ".3g")]
            for k, f in cmp.flips.items()
        ]
        ca, cb = cmp.cost
        cap = (
            f"a = {cmp.a} ({cmp.judge_a}), b = {cmp.b} ({cmp.judge_b}); n = {cmp.n}; all-pass rate "
            f"{_f(cmp.all_pass_rate[0], '.1%')} → {_f(cmp.all_pass_rate[1], '.1%')}"
        )
        out.append(
            (
                f"Compare {cmp.a} → {cmp.b}",
                ["criterion", "n", "a fail", "b fail", "fail→pass", "pass→fail", "McNemar p"],
                rows,
                cap + (f"; {cmp.message}" if cmp.message else ""),
            )
        )
        cost_rows = [
            [fld, _num(getattr(ca, fld)), _num(getattr(cb, fld))]
            for fld in (
                "calls",
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "retries",
                "failed_calls",
                "latency_p50",
                "latency_p95",
                "wall_s",
                "usd",
            )
        ]
        notes = "; ".join(n for n in (ca.note, cb.note) if n)
        out.append((f"Cost {cmp.a} vs {cmp.b}", ["", cmp.a, cmp.b], cost_rows, notes or None))
    for ag in report.agreements:
        rows = [
            [
                k,
                e["n"],
                _f(e["accuracy"]),
                _f(e["kappa"]),
                f"[{_f(e['kappa_ci'][0])}, {_f(e['kappa_ci'][1])}]",
                _f(e["tpr"]),
                _f(e["tnr"]),
                _f(e["prevalence"]),
                _f(e["auc"]),
                _f(e.get("weighted_kappa", math.nan)),
            ]
            for k, e in ag.criteria.items()
        ]
        out.append(
            (
                f"Agreement {ag.source} vs {ag.human}",
                [
                    "criterion",
                    "n",
                    "accuracy",
                    "κ",
                    "κ 95% CI",
                    "TPR",
                    "TNR",
                    "prevalence",
                    "AUC",
                    "weighted κ",
                ],
                rows,
                f"judge: {ag.judge}; human: {ag.human_judge}; fail = positive class"
                + (f"; {ag.message}" if ag.message else ""),
            )
        )
    if report.examples:
        rows = [[eid, _clip(t["question"], 160), _clip(t["answer"])] for eid, t in report.examples.items()]
        out.append(
            ("Examples from the off-diagonal cells and flips", ["id", "question", "answer"], rows, None)
        )
    return out


def _figures(report: Report) -> list[Any]:
    import plotly.graph_objects as go

    from judgekit import figures

    figs = []
    for c in report.phi.columns:
        fig = figures.phi_heatmap(c, report.phi.criteria, f"phi — {c.source} — {c.judge} — n = {c.n}",
                                  c.criterion_notes)
        fig.update_layout(width=520, height=480)
        figs.append(fig)
    if report.compares:
        first = report.compares[0]
        fig = go.Figure()
        fig.add_bar(name=_esc(first.a), x=list(first.attribution[0]), y=list(first.attribution[0].values()))
        for cmp in report.compares:
            fig.add_bar(name=_esc(cmp.b), x=list(cmp.attribution[1]), y=list(cmp.attribution[1].values()))
        fig.update_layout(title="failures attributed to each criterion", barmode="group", height=400)
        figs.append(fig)
    return figs


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;
font-size:.9rem;vertical-align:top}th{background:#f3f3f3}caption{caption-side:bottom;text-align:left;
font-size:.85rem;color:#555;padding-top:.3rem}.figs{display:flex;flex-wrap:wrap;gap:1rem}
"""


def render_html(report: Report) -> str:
    """A self-contained HTML page: plotly.js inlined once, every user-supplied string escaped."""
    import plotly.io as pio

    parts = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>judgekit report — {_esc(report.dataset)}</title><style>{_CSS}</style></head><body>",
        f"<h1>judgekit report — dataset {_esc(report.dataset)}</h1>",
    ]
    parts += [f"<p class='note'>{_esc(n)}</p>" for n in report.notes]
    parts.append("<h2>Phi matrices</h2><div class='figs'>")
    for i, fig in enumerate(_figures(report)):
        parts.append(pio.to_html(fig, include_plotlyjs="inline" if i == 0 else False, full_html=False))
    parts.append("</div>")
    for title, header, rows, caption in _sections(report):
        parts.append(f"<h2>{_esc(title)}</h2><table>")
        if caption:
            parts.append(f"<caption>{_esc(caption)}</caption>")
        parts.append("<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{_esc(v)}</td>" for v in row) + "</tr>" for row in rows]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _md_cell(x: Any) -> str:
    return _esc(_clip(str(x), 2000)).replace("|", "\\|")


def render_markdown(report: Report) -> str:
    """The same tables as Markdown (cells HTML-escaped, pipes escaped; no figures)."""
    out = [f"# judgekit report — dataset {_md_cell(report.dataset)}", ""]
    out += [f"> {_md_cell(n)}" for n in report.notes]
    for title, header, rows, caption in _sections(report):
        out += [
            f"## {_md_cell(title)}",
            "",
            "| " + " | ".join(_md_cell(h) for h in header) + " |",
            "|" + "---|" * len(header),
        ]
        out += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
        if caption:
            out += ["", f"_{_md_cell(caption)}_"]
        out.append("")
    return "\n".join(out)


def warm_cache(s: Session, *, run: str | int | None = None, dataset: str | None = None) -> None:
    """Fill the matrix cache for a run that just finished, or a dataset's human column after its labels
    changed, so the dashboard's first render reads the cache instead of millions of rows. Best effort:
    a failure here never fails the write that triggered it."""
    try:
        if run is not None:
            load_run(s, run)
        if dataset is not None and store.annotators_for_dataset(s, store.get_dataset(s, dataset).id):
            load_human(s, dataset)
    except Exception:  # noqa: BLE001 - the cache is an optimisation only
        pass
