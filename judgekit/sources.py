"""Sources: the store's verdicts and labels as numpy columns aligned on a dataset's examples.

Where this sits: below the execution layer (runner, few-shot) and above the judge, store and statistics
layers. Each *source* -- a run, one annotator, or the human consensus -- is loaded with one column query
into an ``(n_examples, n_criteria)`` float matrix aligned on the dataset's :class:`ExampleIndex`
(internal example ids, sorted), through :mod:`judgekit.matrix_cache` so that a repeated read costs a file
load, not a query. The report layer (:mod:`judgekit.reports`, :mod:`judgekit.labeling`, the pages) turns
sources into statistics; the few-shot draw (:mod:`judgekit.fewshot`) reads the human column from here;
:func:`warm_cache` fills the cache after a write (registered by the entry points, see
:func:`judgekit.matrix_cache.warm_after_writes`).

Conventions: 1.0 = pass, 0.0 = fail, NaN = unscored / unlabelled / unresolved. Scale criteria enter the
binary view through ``pass_at``.

Versions and caching, one place: every cached thing derived from a dataset is keyed by its
:class:`Versions` (read in :mod:`judgekit.store`: per run its largest verdict id, the labels' count, largest
id and latest edit, the examples' count and largest id, the database's identity); :meth:`Versions.of` is a
source's share of it. The matrix cache keeps a source's arrays on disk under that version, and
:func:`shared_source` keeps one read-only :class:`Source` per version in this process, for every reader
(the dashboard's sessions). :func:`current_versions` skips even the version queries on a SQLite file
while nobody has committed.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import matrix_cache, stats, store
from judgekit.annotators import REFERENCE_ANNOTATOR, settle, thresholds
from judgekit.rubric import Criterion

__all__ = [
    "SHARED_SOURCES",
    "ExampleIndex",
    "Source",
    "SourceKind",
    "Versions",
    "criteria_per_call",
    "current_versions",
    "example_index",
    "human_annotators",
    "label_tensor",
    "load_annotator",
    "load_human",
    "load_run",
    "load_source",
    "load_sources",
    "resolve_dataset",
    "run_sample",
    "shared_source",
    "versions",
    "aligned",
    "union_keys",
    "warm_cache",
]

SourceKind = Literal["run", "human", "annotator"]


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

        arrays = matrix_cache.cached(store.cache_namespace(s), "index", str(dataset_id), f"{n}:{last}", compute)
        cache[dataset_id] = ExampleIndex(dataset_id, name, arrays["ids"], arrays["ext"].astype(object))
    return cache[dataset_id]


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
    per_call: int | None = None  # most criteria one call of the run asked (1 = split); None: unknown

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

    def only(self, rows: NDArray[np.bool_]) -> Source:
        """The same source over the examples ``rows`` marks (every other row blank, as if unscored): a view
        restricted to some answers, e.g. the ones the humans labelled, so that two sources are compared on
        the same answers."""
        keep = np.asarray(rows, dtype=bool)[:, None]
        return replace(
            self,
            raw=np.where(keep, self.raw, np.nan),
            binary=np.where(keep, self.binary, np.nan),
            p_pass=None if self.p_pass is None else np.where(keep, self.p_pass, np.nan),
        )

    def read_only(self) -> Source:
        """This source with its arrays (and its index's) marked read-only, to be shared between readers
        (the dashboard keeps one object per loaded source): an in-place write then fails loudly."""
        for arr in (self.raw, self.binary, self.p_pass, self.index.ids, self.index.ext):
            if arr is not None:
                arr.flags.writeable = False
        return self

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
    if store.run_level(run) == "bundle":
        raise ValueError(f"run {run.name!r} judged bundles, not answers: see `judgekit report ab` / `report ko`")
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

    arrays = matrix_cache.cached(store.cache_namespace(s), "run", store.run_cache_key(run),
                                 f"{store.last_verdict_id(s, run.id)}:{len(index)}:{crit_ids.tolist()}", compute)
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
        binary=stats.binarize(raw, thresholds(criteria)),
        p_pass=pp,
        judged=judged,
        run_id=run.id,
        judge_kind=judge.kind if judge else None,
        model=judge.model if judge else None,
        per_call=criteria_per_call(run.harness, len(criteria)),
    )


def run_sample(s: Session, run: store.Run, index: ExampleIndex) -> NDArray[np.bool_]:
    """Which rows of ``index`` are in the run's sample of answers (fixed when the run is created), read
    straight into numpy through the matrix cache."""

    def compute() -> dict[str, np.ndarray]:
        (ex,) = _columns(s, select(store.RunExample.example_id).where(store.RunExample.run_id == run.id), 1)
        rows = np.zeros(len(index), dtype=bool)
        rows[index.rows_of(ex.astype(np.int64))] = True
        return {"rows": rows}

    return matrix_cache.cached(store.cache_namespace(s), "sample", store.run_cache_key(run), str(len(index)),
                               compute)["rows"]


def criteria_per_call(harness: dict | None, n_criteria: int) -> int | None:
    """The most criteria one call of a harness asks: 1 for split, the largest group for grouped, every
    criterion for single; None when the run does not say (an imported run). The audit's *reference* is
    the run with the fewest -- the least-conditioned harness."""
    kind = (harness or {}).get("kind")
    if kind == "split":
        return 1
    if kind == "grouped":
        return max([len(g) for g in harness.get("groups", [])] + [1])
    if kind == "single":
        return n_criteria
    return None


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


def _stray_keys_anywhere(s: Session, known: Sequence[str]) -> bool:
    """Whether any label, in any dataset, has a key outside ``known``: one probe of the criterion index per
    gap between the sorted known keys (a NOT IN over the labels would read all of them)."""
    L = store.Label
    bounds: list[str | None] = [None, *sorted(set(known)), None]
    for lo, hi in itertools.pairwise(bounds):
        inside = [c for c in (None if lo is None else L.criterion > lo, None if hi is None else L.criterion < hi)
                  if c is not None]
        if s.scalar(select(select(L.id).where(*inside).exists())):
            return True
    return False


def _labelled_keys(s: Session, dataset_id: int) -> list[str]:
    """Criterion keys with at least one label in the dataset: an EXISTS probe per known key (cheap), plus
    a scan for keys no rubric defines only when such labels exist."""
    L, E = store.Label, store.Example
    in_dataset = select(L.id).join(E, E.id == L.example_id).where(E.dataset_id == dataset_id)
    known = list(store.criteria_by_key(s))
    keys = [k for k in known if s.scalar(select(in_dataset.where(L.criterion == k).exists()))]
    if _stray_keys_anywhere(s, known) and s.scalar(select(in_dataset.where(L.criterion.not_in(known)).exists())):
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
        version = store.labels_version(s)
        key = f"{index.dataset_id}:{names}:{[c.key for c in criteria]}"
        arrays = matrix_cache.cached(
            store.cache_namespace(s), "labels", key, f"{tuple(version)}:{len(index)}",
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
        binary=stats.binarize(raw, thresholds(crits)),
        judged=judged,
    )


def human_annotators(s: Session, ds: store.Dataset) -> list[str]:
    """The annotators behind the human column: every one except ``reference``, or ``reference`` alone
    when nobody else labelled. Raises ``NotFound`` when the dataset has no labels at all."""
    every = store.annotators_for_dataset(s, ds.id)
    if not every:
        raise store.NotFound(f"dataset {ds.name!r} has no human labels (see `judgekit import-labels`)")
    return [a for a in every if a != REFERENCE_ANNOTATOR] or every


def load_human(
    s: Session, dataset: str | store.Dataset, criteria: Sequence[Criterion] | None = None
) -> Source:
    """The human column: the majority of every annotator except ``reference``, ties unresolved (NaN).

    * Binary view: :func:`judgekit.annotators.settle` — the majority of the annotators' binary
      views (scale labels through ``pass_at``), a tie NaN (never a silent pass or fail), and where an
      ``adjudicator`` labelled a cell, the adjudicators settle it.
    * Raw view (scale metrics): :func:`stats.consensus_scale` (median) for scale criteria.
    * ``reference`` (the demo's planted truth) is left out whenever another annotator exists; when it is
      the only annotator the human column *is* ``reference`` and the source says ``human:reference``.
      The source key is ``human`` otherwise; ``judge`` names the annotators behind it.

    Raises ``NotFound`` when the dataset has no labels at all.
    """
    ds = dataset if isinstance(dataset, store.Dataset) else store.get_dataset(s, dataset)
    index = example_index(s, ds.id)
    chosen = human_annotators(s, ds)
    names, crits, L, judged = label_tensor(s, index, criteria, chosen)
    binary = settle(L, store.annotator_roles(s, names), crits)
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
    keys = union_keys(sources)
    crits: tuple[Criterion, ...] | None = None
    if sources:
        by_key = {c.key: c for src in sources for c in src.criteria}
        crits = tuple(by_key[k] for k in keys)
    if human:
        sources.append(load_human(s, ds, crits))
    for a in annotators:
        sources.append(load_annotator(s, ds, a, crits))
    keys = union_keys(sources)
    return [src.select(keys) for src in sources]


def aligned(srcs: Sequence[Source]) -> list[Source]:
    """Sources on one criteria list for the dashboard's views: the criteria some run judged (in order),
    else whatever was labelled (a criterion only humans labelled has no harness to compare)."""

    def judged(group: Sequence[Source]) -> list[str]:
        every = list(dict.fromkeys(k for src in group for k in src.keys))
        return [k for k in every if any(k in src.judged for src in group)]

    keys = judged([x for x in srcs if x.kind == "run"]) or judged(srcs)
    return [x.select(keys) for x in srcs]


def union_keys(sources: Sequence[Source]) -> list[str]:
    """Criteria of every source, in order, without those nobody judged (unless nobody judged anything)."""
    every = list(dict.fromkeys(k for src in sources for k in src.keys))
    return [k for k in every if any(k in src.judged for src in sources)] or every


def load_source(s: Session, dataset_id: int, key: str) -> Source:
    """The source a dashboard key names: ``run:<id>``, ``human`` (the consensus) or ``annotator:<name>``."""
    if key.startswith("run:"):
        return load_run(s, int(key.split(":", 1)[1]))
    ds = s.get(store.Dataset, dataset_id)
    if key == "human":
        return load_human(s, ds)
    return load_annotator(s, ds, key.split(":", 1)[1])


# ------------------------------------------------------------------------------ versions and shared sources


class Versions(NamedTuple):
    """A dataset's data version: what every cached thing derived from it is keyed by."""

    runs: dict[int, int | None]  # store.run_versions: per run its largest verdict id
    labels: tuple[int, int | None, str | None]  # store.labels_version: count, largest id, latest updated_at
    database: str = ""  # store.database_identity (a database recreated at the same URL reuses ids)
    examples: tuple[int, int | None] = (0, None)  # the dataset's examples: count, largest id

    def of(self, key: str) -> tuple:
        """The version of one source (``run:<id>``, ``human``, ``annotator:<name>``): the examples' and the
        run's verdicts' or the labels'."""
        own = self.runs.get(int(key.split(":", 1)[1])) if key.startswith("run:") else self.labels
        return self.database, self.examples, own


def versions(s: Session, dataset_id: int) -> Versions:
    """:class:`Versions` in four small queries: index lookups (verdicts are only ever inserted, and deleted
    only with their run, so a run's largest verdict id moves exactly when they change), not counts of
    verdicts."""
    n, last = s.execute(select(func.count(), func.max(store.Example.id))
                        .where(store.Example.dataset_id == dataset_id)).one()
    return Versions(store.run_versions(s, dataset_id), store.labels_version(s), store.database_identity(s),
                    (int(n), last))


class _Watch:
    """A SQLite connection (it only reads) whose ``PRAGMA data_version`` changes whenever *another* connection
    commits: while it stands still, the last versions of each dataset are still the versions, and a
    re-render skips even their queries (~0.15 s with the 1M planted labels of a 100k demo)."""

    def __init__(self, path: str) -> None:
        self.lock = threading.Lock()
        self.path = path
        self._connect()

    def _connect(self) -> None:
        self.conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)  # never writes
        self.file = _file_id(self.path)
        self.version: int | None = None
        self.known: dict[int, Versions] = {}

    def versions(self, s: Session, dataset_id: int) -> Versions:
        with self.lock:
            if _file_id(self.path) != self.file:  # deleted and recreated: the old handle sees the old file
                self.conn.close()
                self._connect()
            version = self.conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self.version:  # read before the query: a commit racing it is seen next time
                self.version, self.known = version, {}
            if dataset_id not in self.known:
                self.known[dataset_id] = versions(s, dataset_id)
            return self.known[dataset_id]


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


_watches: dict[str, _Watch | None] = {}
_watches_lock = threading.Lock()


def _watch(s: Session) -> _Watch | None:
    url = s.get_bind().url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    with _watches_lock:
        if url.database not in _watches:
            try:
                _watches[url.database] = _Watch(url.database)
            except sqlite3.Error:
                _watches[url.database] = None
        return _watches[url.database]


def current_versions(s: Session, dataset_id: int) -> Versions:
    """:func:`versions`, skipped on a SQLite file while nobody has committed since the last call."""
    watch = _watch(s)
    return watch.versions(s, dataset_id) if watch is not None else versions(s, dataset_id)


SHARED_SOURCES = 12  # sources kept per process (~10-20 MB each at 100k examples): 4 runs + human + a few
_shared: OrderedDict[tuple, Source] = OrderedDict()
_loading: dict[tuple, threading.Lock] = {}
_shared_lock = threading.Lock()


def shared_source(s: Session, dataset_id: int, key: str, of: Versions) -> Source:
    """Source ``key`` of the dataset (:func:`load_source`) at versions ``of``: loaded once per version and
    process, then one read-only object shared by every reader (the :data:`SHARED_SOURCES` most recent are
    kept). Two readers asking for the same missing source wait for one load."""
    entry = (s.get_bind().url.render_as_string(hide_password=True), dataset_id, key, of.of(key))
    with _shared_lock:
        if entry in _shared:
            _shared.move_to_end(entry)
            return _shared[entry]
        gate = _loading.setdefault(entry, threading.Lock())
    with gate:
        with _shared_lock:
            if entry in _shared:
                return _shared[entry]
        src = load_source(s, dataset_id, key).read_only()
        with _shared_lock:
            _shared[entry] = src
            _loading.pop(entry, None)
            while len(_shared) > SHARED_SOURCES:
                _shared.popitem(last=False)
    return src


def warm_cache(s: Session, *, run: str | int | None = None, dataset: str | None = None) -> None:
    """Fill the matrix cache for a run that just finished, or a dataset's human column after its labels
    changed, so the dashboard's first render reads the cache instead of millions of rows. Best effort:
    a failure here never fails the write that triggered it."""
    try:
        if run is not None:
            src = load_run(s, run)
            row = s.get(store.Run, src.run_id)
            run_sample(s, row, src.index)
            store.verdict_outcomes(s, row.id)
        if dataset is not None and store.annotators_for_dataset(s, store.get_dataset(s, dataset).id):
            load_human(s, dataset)
    except Exception:  # noqa: BLE001 - the cache is an optimisation only
        pass
