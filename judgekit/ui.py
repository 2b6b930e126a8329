"""Helpers for the analysis pages (Cross-tabs, Associations, Compare, Agreement).

Where this sits in the flow: a page reads its widgets, asks this module for a :class:`Workspace` (the
chosen dataset, its runs and annotators, and a cheap *data fingerprint*), loads the sources it shows
through the cached loaders here, calls :mod:`judgekit.reports`, and renders with the builders here.

Caching: every source (a run, the human column, one annotator) is loaded once per fingerprint with
``st.cache_data`` and everything else -- phi matrices, audits, comparisons, agreement -- is derived from
those cached sources (and cached itself where it costs more than a few milliseconds). The fingerprint
is one small SQL query (:func:`fingerprint`): per run the largest id of its verdicts (verdicts are only
ever inserted, so that id moves exactly when they change -- an index lookup where a count would scan),
and for the labels their count, largest id and latest ``updated_at`` (labels are upserted). On a SQLite
file even that query is skipped while ``PRAGMA data_version`` says nobody has committed since
(:func:`current_fingerprint`). When a run progresses or someone labels, the fingerprint moves and the
next render reloads just what changed; otherwise a re-render is a cache hit.

Safety: answers, questions, contexts, rationales, notes, run / dataset / annotator / judge names are
untrusted text. They are rendered with ``st.text`` / ``st.code`` / ``st.dataframe`` or escaped with
:func:`md` before they reach Markdown, and escaped with :func:`html.escape` before they reach plotly
(whose titles understand a few HTML tags). Nothing here uses ``unsafe_allow_html``.
"""

from __future__ import annotations

import contextlib
import math
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
from sqlalchemy import String, cast, func, literal, select, union_all
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from judgekit import config, reports, store
from judgekit.figures import (  # noqa: F401 - the pure builders live in figures; pages import them from here
    agreement_frame,
    annotator_frames,
    attribution_figure,
    audit_frame,
    cost_frame,
    cost_vs_agreement_figure,
    crosstab_table,
    diff_heatmap,
    flips_frame,
    fmt,
    kappa_figure,
    phi_heatmap,
)
from judgekit.webapp import empty_state, session

__all__ = [
    "endpoint_inputs",
    "page_workspace",
    "HANDOFF_KEY",
    "ExampleDetail",
    "PhiView",
    "RunInfo",
    "Workspace",
    "agreement",
    "agreement_frame",
    "annotator_agreement",
    "annotator_frames",
    "attribution_figure",
    "audit_frame",
    "compare",
    "cost_frame",
    "cost_vs_agreement",
    "cost_vs_agreement_figure",
    "crosstab_sentence",
    "crosstab_table",
    "diff_heatmap",
    "caption",
    "clip",
    "current_fingerprint",
    "download_report",
    "example_detail",
    "example_texts",
    "Fingerprint",
    "fingerprint",
    "flips_frame",
    "fmt",
    "kappa_figure",
    "load_workspace",
    "md",
    "no_labels",
    "no_runs",
    "open_crosstab",
    "phi",
    "phi_heatmap",
    "pick",
    "points",
    "ratio_sentence",
    "render_example",
    "report_html",
    "source",
    "sources",
    "take_handoff",
    "undefined_phi",
    "workspace",
]

HANDOFF_KEY = "crosstab_handoff"
"""Session-state key through which a page hands a (source, criterion pair) to the Cross-tabs page."""

NO_RUNS = (
    "No runs on this dataset yet: start one on the Run page or with `judgekit run --dataset NAME "
    "--rubric NAME --harness single …` (or bring verdicts from elsewhere with `judgekit import-run`)."
)
NO_LABELS = (
    "No human labels on this dataset yet: label on the Label page or import labels with "
    "`judgekit import-labels PATH --dataset NAME`."
)
NO_DATASETS = (
    "No datasets yet: load the demo on the Workspace page (or `judgekit demo`), or import your outputs with "
    "`judgekit import-dataset PATH --name NAME`."
)
MAX_SHOWN_CHARS = 20_000  # per text of one example on screen
SOURCE_ENTRIES = 12  # loaded sources kept per process (~10-20 MB each at 100k examples): 4 runs + human + a few
CACHE_ENTRIES = 32  # derived results (phi views, comparisons, agreement): small


# --------------------------------------------------------------------------------------------- text


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&])")


def md(text: Any) -> str:
    """``text`` made inert for ``st.markdown`` / ``st.caption``: every Markdown, directive (``:red[…]``,
    ``:material/…:``), LaTeX (``$``) and HTML character backslash-escaped, newlines flattened."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def points(a: float, b: float) -> str | None:
    """The change from rate ``a`` to rate ``b`` in percentage points (``None`` if either is undefined)."""
    return f"{(b - a) * 100:+.1f} points" if math.isfinite(a) and math.isfinite(b) else None


def clip(text: str | None, n: int = 240) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --------------------------------------------------------------------------------------------- workspace


@dataclass(frozen=True)
class RunInfo:
    """A run of the chosen dataset as the pickers show it; ``fp`` moves whenever its verdicts change."""

    id: int
    name: str
    judge: str  # store.judge_label: says "(simulated)" for the simulated judge
    judge_kind: str
    model: str | None
    harness: str
    status: str
    rubric: str
    last_verdict: int | None
    wall_s: float
    totals: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"run:{self.id}"

    @property
    def fp(self) -> tuple:
        return (self.id, self.last_verdict, self.status, self.wall_s)


@dataclass(frozen=True)
class Workspace:
    """The dataset a page analyses: its runs, annotators, and the data fingerprint of each source."""

    db_url: str
    dataset: str
    dataset_id: int
    examples: int
    runs: tuple[RunInfo, ...]
    annotators: tuple[str, ...]
    labels_fp: tuple
    examples_fp: tuple = ()

    @property
    def has_labels(self) -> bool:
        return bool(self.annotators)

    def run(self, key: str) -> RunInfo:
        return next(r for r in self.runs if r.key == key)

    def source_keys(self, *, runs: bool = True, human: bool = True, annotators: bool = True) -> list[str]:
        """Picker options: ``run:<id>`` for each run, ``human`` (the consensus), ``annotator:<name>``."""
        out = [r.key for r in self.runs] if runs else []
        if self.annotators and human:
            out.append("human")
        if annotators:
            out += [f"annotator:{a}" for a in self.annotators]
        return out

    def fp(self, key: str) -> tuple:
        """A source's cache key: the dataset's examples, then the run's verdicts or the labels."""
        return (self.examples_fp, self.run(key).fp if key.startswith("run:") else self.labels_fp)

    def name(self, key: str) -> str:
        """How a source is named in sentences: ``run NAME``, ``the human column``, ``annotator NAME``."""
        if key.startswith("run:"):
            return f"run {self.run(key).name}"
        if key == "human":
            return "the human column"
        return f"annotator {key.split(':', 1)[1]}"

    def judge(self, key: str) -> str:
        """Who produced a source's values (the simulated judge always says *simulated*)."""
        if key.startswith("run:"):
            return self.run(key).judge
        if key == "human":
            others = [a for a in self.annotators if a != reports.REFERENCE_ANNOTATOR]
            if not others:
                return "human: reference (the demo's planted truth)"
            if len(others) == 1:
                return f"human: {others[0]}"
            return f"human consensus of {', '.join(others)} (ties unresolved)"
        return f"human annotator {key.split(':', 1)[1]}"

    def label(self, key: str) -> str:
        """Picker label: name, judge and (for runs) harness."""
        if key.startswith("run:"):
            r = self.run(key)
            return f"{r.name} — {r.judge} · {r.harness or 'imported'}"
        return f"{self.name(key)} — {self.judge(key)}"


class Fingerprint(NamedTuple):
    """What the cached loaders are keyed by: per run its largest verdict id, and the labels' state."""

    runs: dict[int, int | None]
    labels: tuple[int, int | None, str | None]  # count, largest id, latest updated_at


def fingerprint(s: Session, dataset_id: int) -> Fingerprint:
    """The data fingerprint of a dataset, in one small query.

    * Runs: the largest verdict id of each run of the dataset -- an index lookup, not a count. Verdicts
      are only ever inserted (a resume skips existing ones, ``ON CONFLICT DO NOTHING``) and only deleted
      with their run, so a run's verdicts changed exactly when its largest id did; counting 600k
      verdicts per run would cost ~0.1 s for nothing.
    * Labels (all datasets: cheaper than joining examples, and only errs on the side of reloading):
      count (catches deletions), largest id (inserts) and latest ``updated_at`` (edits: labels are
      upserted in place).
    """
    V, L, R = store.Verdict, store.Label, store.Run
    last = select(func.max(V.id)).where(V.run_id == R.id).scalar_subquery()
    stmt = union_all(
        select(R.id, literal(0), cast(last, String)).where(R.dataset_id == dataset_id),
        select(
            literal(-1),
            func.count(),
            cast(func.max(L.id), String) + "|" + cast(func.max(L.updated_at), String),
        ),
    )
    runs: dict[int, int | None] = {}
    labels: tuple[int, int | None, str | None] = (0, None, None)
    for rid, n, last_value in s.execute(stmt):
        if rid == -1:
            if n:
                max_id, _, updated = last_value.partition("|")
                labels = (int(n), int(max_id), updated)
        else:
            runs[int(rid)] = int(last_value) if last_value is not None else None
    return Fingerprint(runs, labels)


class _Watch:
    """A SQLite connection (it only reads) whose ``PRAGMA data_version`` changes whenever *another* connection
    commits: while it stands still, the last fingerprint of each dataset is still the fingerprint, and
    a re-render skips even the fingerprint query (~0.15 s with the 1M planted labels of a 100k demo)."""

    def __init__(self, path: str) -> None:
        self.lock = threading.Lock()
        self.conn = sqlite3.connect(path, timeout=30, check_same_thread=False)  # never writes
        self.version: int | None = None
        self.known: dict[int, Fingerprint] = {}

    def fingerprint(self, s: Session, dataset_id: int) -> Fingerprint:
        with self.lock:
            version = self.conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self.version:  # read before the query: a commit racing it is seen next time
                self.version, self.known = version, {}
            if dataset_id not in self.known:
                self.known[dataset_id] = fingerprint(s, dataset_id)
            return self.known[dataset_id]


@st.cache_resource(show_spinner=False)
def _watch(db_url: str) -> _Watch | None:
    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    try:
        return _Watch(url.database)
    except sqlite3.Error:
        return None


def current_fingerprint(s: Session, dataset_id: int) -> Fingerprint:
    """:func:`fingerprint`, skipped while nobody has committed since the last one (SQLite files)."""
    watch = _watch(config.db_url())
    return watch.fingerprint(s, dataset_id) if watch is not None else fingerprint(s, dataset_id)


def load_workspace(s: Session, dataset_id: int, fp: Fingerprint, annotators: Sequence[str]) -> Workspace:
    """The runs of a dataset with their fingerprints (small queries; no verdict is read)."""
    ds = s.get(store.Dataset, dataset_id)
    n_examples, last_example = s.execute(
        select(func.count(), func.max(store.Example.id)).where(store.Example.dataset_id == dataset_id)
    ).one()
    rows = s.execute(
        select(store.Run, store.Judge, store.RubricRow.name)
        .join(store.Judge, store.Judge.id == store.Run.judge_id)
        .join(store.RubricRow, store.RubricRow.id == store.Run.rubric_id)
        .where(store.Run.dataset_id == dataset_id)
        .order_by(store.Run.id)
    ).all()
    runs = tuple(
        RunInfo(
            id=run.id,
            name=run.name,
            judge=store.judge_label(judge),
            judge_kind=judge.kind,
            model=judge.model,
            harness=store.harness_label(run.harness) if run.harness.get("kind") != "imported" else "imported",
            status=run.status,
            rubric=rubric,
            last_verdict=fp.runs.get(run.id),
            wall_s=float(run.wall_s or 0.0),
            totals=dict(run.totals or {}),
        )
        for run, judge, rubric in rows
    )
    return Workspace(
        config.db_url(),
        ds.name,
        ds.id,
        int(n_examples),
        runs,
        tuple(annotators),
        fp.labels,
        (int(n_examples), last_example),
    )


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _annotators(db_url: str, dataset_id: int, labels_fp: tuple) -> tuple[str, ...]:
    with Session(store.engine_for(db_url)) as s:
        return tuple(store.annotators_for_dataset(s, dataset_id))


def workspace(prefix: str) -> Workspace | None:
    """Dataset picker (``{prefix}_dataset``, shown only when there are several) and the chosen dataset's
    workspace; shows the empty state and returns ``None`` when there is no dataset."""
    with session() as s:
        datasets = store.list_datasets(s)
        if not datasets:
            empty_state(NO_DATASETS)
            empty_state(NO_RUNS)
            return None
        run_counts = dict(s.execute(select(store.Run.dataset_id, func.count()).group_by(store.Run.dataset_id)).all())
    by_id = {d["id"]: d for d in datasets}
    ids = [d["id"] for d in datasets]
    if len(ids) > 1:
        default = max(ids, key=lambda i: (run_counts.get(i, 0), -i))
        dataset_id = pick(
            "Dataset",
            ids,
            key=f"{prefix}_dataset",
            default=default,
            format_func=lambda i: f"{by_id[i]['name']} ({by_id[i]['examples']} examples, {run_counts.get(i, 0)} runs)",
        )
    else:
        dataset_id = ids[0]
    with session() as s:
        fp = current_fingerprint(s, dataset_id)
        annotators = _annotators(config.db_url(), dataset_id, fp.labels)
        return load_workspace(s, dataset_id, fp, annotators)


def page_workspace(prefix: str) -> Workspace:
    """An analysis page's workspace, with the empty states shown (no runs, no labels); stops the page
    when there is no dataset at all."""
    ws = workspace(prefix)
    if ws is None:
        st.stop()
    if not ws.runs:
        no_runs()
    if not ws.has_labels:
        no_labels()
    return ws


def no_runs() -> None:
    empty_state(NO_RUNS)


def no_labels() -> None:
    empty_state(NO_LABELS)


def pick(label: str, options: Sequence, *, key: str, default: Any = None, widget=None, **kwargs) -> Any:
    """A select widget whose state lives under ``key``: a stale or missing value falls back to
    ``default`` (or the first option) *before* the widget is created, so no ``index`` is ever passed."""
    options = list(options)
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else (options[0] if options else None)
    return (widget or st.selectbox)(label, options, key=key, **kwargs)


# --------------------------------------------------------------------------------------------- loading


def _load(s: Session, dataset_id: int, key: str) -> reports.Source:
    if key.startswith("run:"):
        return reports.load_run(s, int(key.split(":", 1)[1]))
    ds = s.get(store.Dataset, dataset_id)
    if key == "human":
        return reports.load_human(s, ds)
    return reports.load_annotator(s, ds, key.split(":", 1)[1])


@st.cache_data(max_entries=8, show_spinner=False)
def _example_index(db_url: str, dataset_id: int, examples_fp: tuple) -> reports.ExampleIndex:
    with Session(store.engine_for(db_url)) as s:
        return reports.example_index(s, dataset_id)


def _seed_index(s: Session, db_url: str, dataset_id: int, examples_fp: tuple) -> None:
    """Hand the cached example index to :func:`reports.example_index`, which keeps one per session
    (building it reads every example id of the dataset: ~0.3-1 s at 100k examples)."""
    key = getattr(reports, "_index_cache_key", None)
    if key is not None:
        s.info.setdefault(key, {}).setdefault(dataset_id, _example_index(db_url, dataset_id, examples_fp))


@st.cache_data(max_entries=SOURCE_ENTRIES, show_spinner="Loading verdicts…")
def _source(db_url: str, dataset_id: int, key: str, fp: tuple, _s: Session | None = None) -> reports.Source:
    """One source per (key, fingerprint); ``fp[0]`` is the examples' fingerprint. ``_s`` (not part of
    the cache key) lets several loads share one session."""
    with contextlib.ExitStack() as stack:
        s = _s if _s is not None else stack.enter_context(Session(store.engine_for(db_url)))
        _seed_index(s, db_url, dataset_id, fp[0])
        return _load(s, dataset_id, key)


def _many(db_url: str, dataset_id: int, keys: Sequence[str], fps: Sequence[tuple]) -> list[reports.Source]:
    """Sources through the per-source cache; the misses are loaded in one shared session."""
    with Session(store.engine_for(db_url)) as s:
        return [_source(db_url, dataset_id, k, fp, _s=s) for k, fp in zip(keys, fps, strict=True)]


def source(ws: Workspace, key: str) -> reports.Source:
    """One source, loaded once per fingerprint (cached)."""
    return _source(ws.db_url, ws.dataset_id, key, ws.fp(key))


def _aligned(srcs: Sequence[reports.Source]) -> list[reports.Source]:
    """Sources on one criteria list: the criteria some run judged (in order), else whatever was labelled."""

    def union(group: Sequence[reports.Source]) -> list[str]:
        every = list(dict.fromkeys(k for src in group for k in src.keys))
        return [k for k in every if any(k in src.judged for src in group)]

    keys = union([x for x in srcs if x.kind == "run"]) or union(srcs)
    return [x.select(keys) for x in srcs]


def sources(ws: Workspace, keys: Sequence[str]) -> list[reports.Source]:
    """Several sources aligned on one criteria list (each loaded through the per-source cache)."""
    return _aligned(_many(ws.db_url, ws.dataset_id, keys, [ws.fp(k) for k in keys]))


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Computing phi and bootstrap intervals…")
def _phi(
    db_url: str, dataset_id: int, keys: tuple[str, ...], names: tuple[str, ...], fps: tuple, n_boot: int
) -> PhiView:
    srcs = _aligned(_many(db_url, dataset_id, keys, fps))
    notes = tuple(undefined_phi(src, name) for src, name in zip(srcs, names, strict=True))
    return PhiView(reports.phi_report(srcs, n_boot=n_boot), notes)


class PhiView(NamedTuple):
    """A phi report and, per source (in order), why some criteria have no phi (:func:`undefined_phi`)."""

    report: reports.PhiReport
    notes: tuple[dict[str, str], ...]


def phi(ws: Workspace, keys: Sequence[str], n_boot: int = 1000) -> PhiView:
    """Phi matrices with bootstrap CIs, the association audit, and the undefined-phi sentences for the
    sources ``keys`` (cached: a re-render unpickles one small object, not the sources)."""
    keys = tuple(keys)
    names = tuple(ws.name(k) for k in keys)
    return _phi(ws.db_url, ws.dataset_id, keys, names, tuple(ws.fp(k) for k in keys), n_boot)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Comparing runs…")
def _compare(db_url: str, dataset_id: int, a: str, b: str, fps: tuple) -> reports.CompareReport:
    A, B = _many(db_url, dataset_id, (a, b), fps)
    with Session(store.engine_for(db_url)) as s:
        return reports.compare_sources(s, A, B)


def compare(ws: Workspace, a: str, b: str) -> reports.CompareReport:
    """Flips, McNemar, attribution, all-pass rates and cost of two runs (cached)."""
    return _compare(ws.db_url, ws.dataset_id, a, b, (ws.fp(a), ws.fp(b)))


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _agreement(db_url: str, dataset_id: int, judge: str, ref: str, fps: tuple) -> reports.AgreementReport:
    J, R = _many(db_url, dataset_id, (judge, ref), fps)
    if judge.startswith("run:") and ref.startswith("run:"):
        keys = [k for k in J.keys if k in set(R.keys)]  # judge vs judge: the criteria both rubrics have
        return reports.agreement_report(J.select(keys), R.select(keys))
    return reports.agreement_report(J, R)


def agreement(ws: Workspace, judge: str, ref: str) -> reports.AgreementReport:
    """Agreement of source ``judge`` with reference ``ref`` (the human column, an annotator or a run)."""
    return _agreement(ws.db_url, ws.dataset_id, judge, ref, (ws.fp(judge), ws.fp(ref)))


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _annotator_agreement(
    db_url: str, dataset_id: int, labels_fp: tuple, include_reference: bool
) -> reports.AnnotatorAgreement | None:
    with Session(store.engine_for(db_url)) as s:
        ds = s.get(store.Dataset, dataset_id)
        return reports.annotator_agreement(s, ds, include_reference=include_reference)


def annotator_agreement(ws: Workspace, include_reference: bool = False) -> reports.AnnotatorAgreement | None:
    names = [a for a in ws.annotators if include_reference or a != reports.REFERENCE_ANNOTATOR]
    if len(names) < 2:
        return None
    return _annotator_agreement(ws.db_url, ws.dataset_id, ws.labels_fp, include_reference)


def _usd(run: RunInfo, prices: dict[str, reports.Price]) -> float | None:
    """Money from the run's stored totals, with :func:`reports.run_cost`'s rules for free judges."""
    if run.judge_kind in reports.FREE_JUDGE_KINDS:
        return 0.0
    t = run.totals
    return reports.price_calls(
        run.model,
        int(t.get("prompt_tokens") or 0),
        int(t.get("cached_tokens") or 0),
        int(t.get("completion_tokens") or 0),
        prices,
    )


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Scoring every run against the human column…")
def _cost_vs_agreement(db_url: str, dataset_id: int, runs: tuple[RunInfo, ...], fps: tuple) -> pd.DataFrame:
    human, *srcs = _many(db_url, dataset_id, ["human", *(r.key for r in runs)], fps)
    prices = reports.load_prices()
    rows = []
    for r, src in zip(runs, srcs, strict=True):
        ag = reports.agreement_report(src, human)
        kappas = [e["kappa"] for e in ag.criteria.values() if math.isfinite(e["kappa"])]
        t = r.totals
        tokens = int(t.get("prompt_tokens") or 0) + int(t.get("completion_tokens") or 0)
        rows.append(
            {
                "run": r.name,
                "harness": r.harness or "imported",
                "judge": r.judge,
                "calls": int(t.get("calls") or 0),
                "tokens": tokens,
                "usd": _usd(r, prices),
                "mean_kappa": float(np.mean(kappas)) if kappas else math.nan,
                "criteria": len(kappas),
                "n": max((e["n"] for e in ag.criteria.values()), default=0),
            }
        )
    return pd.DataFrame(rows)


def cost_vs_agreement(ws: Workspace) -> pd.DataFrame:
    """Per run of the dataset: calls, tokens, USD (None when the model has no price) and the mean κ of
    its criteria against the human column (criteria with an undefined κ are left out of the mean)."""
    fps = tuple(ws.fp(k) for k in ["human", *(r.key for r in ws.runs)])
    return _cost_vs_agreement(ws.db_url, ws.dataset_id, ws.runs, fps)


def report_html(db_url: str, dataset: str, runs: Sequence[str], human: bool) -> bytes:
    """The exported HTML report (:func:`reports.build_report` → :func:`reports.render_html`).

    Plain function (no Streamlit): pages hand it to ``st.download_button`` as a deferred callable, so the
    report is only built when someone clicks.
    """
    with Session(store.engine_for(db_url)) as s:
        has_labels = bool(store.annotators_for_dataset(s, store.get_dataset(s, dataset).id))
        rep = reports.build_report(s, list(runs) or None, human=human and has_labels, dataset=dataset)
    return reports.render_html(rep).encode("utf-8")


def download_report(ws: Workspace, runs: Sequence[str], *, key: str, human: bool = True) -> None:
    """A download button for the HTML report of ``runs`` (run names); built only on click."""

    def build() -> bytes:
        return report_html(ws.db_url, ws.dataset, runs, human)

    st.download_button(
        "Download the HTML report",
        data=build,
        file_name=f"judgekit-report-{re.sub(r'[^A-Za-z0-9_.-]+', '_', ws.dataset)}.html",
        mime="text/html",
        key=key,
        on_click="ignore",
        icon=":material/download:",
    )


# --------------------------------------------------------------------------------------------- phi in words


def undefined_phi(src: reports.Source, name: str) -> dict[str, str]:
    """Why phi is undefined for a criterion under a source (:func:`reports.undefined_phi_notes`)."""
    return reports.undefined_phi_notes(src, name)


# --------------------------------------------------------------------------------------------- crosstab


def crosstab_sentence(ct: reports.CrosstabReport) -> str:
    """ "Among the 366 answers that pass cites_source, 2.2% fail answers_question; among the 234 that fail
    it, 31.2% do." -- each rate is a cell divided by its own row total."""
    t = ct.table
    n_pass, n_fail = (int(x) for x in t.row_totals)
    r_pass, r_fail = t.col_fail_rate
    first = (
        f"Among the {n_pass} answers that pass {ct.row}, {fmt(r_pass, '.1%')} fail {ct.col}"
        if n_pass
        else f"No answer passes {ct.row}"
    )
    second = f"among the {n_fail} that fail it, {fmt(r_fail, '.1%')} do." if n_fail else f"no answer fails {ct.row}."
    return f"{first}; {second}"


def ratio_sentence(ct: reports.CrosstabReport) -> str:
    t = ct.table
    if math.isfinite(t.ratio):
        return (
            f"{ct.col} fails {t.ratio:.2f} times as often among the answers that fail {ct.row} as among "
            f"those that pass it (1 would mean unrelated)."
        )
    if t.row_totals.min() == 0:
        return f"The ratio is undefined: one row of {ct.row} is empty."
    return f"The ratio is undefined: no answer that passes {ct.row} fails {ct.col}, so there is nothing to divide by."


# --------------------------------------------------------------------------------------------- examples


def example_texts(s: Session, dataset_id: int, ext_ids: Sequence[str]) -> pd.DataFrame:
    """id, question, context, answer of the given examples (in the given order), texts clipped."""
    found: dict[str, tuple[str, str, str]] = {}
    ids = list(ext_ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        for e, q, c, a in s.execute(
            select(store.Example.ext_id, store.Example.question, store.Example.context, store.Example.answer).where(
                store.Example.dataset_id == dataset_id, store.Example.ext_id.in_(chunk)
            )
        ):
            found[e] = (q or "", c or "", a or "")
    return pd.DataFrame(
        [
            {
                "id": e,
                "question": clip(found[e][0], 200),
                "context": clip(found[e][1], 200),
                "answer": clip(found[e][2], 300),
            }
            for e in ids
            if e in found
        ],
        columns=["id", "question", "context", "answer"],
    )


@dataclass(frozen=True)
class ExampleDetail:
    """One example's texts and every verdict and label on it."""

    id: str
    question: str
    context: str
    answer: str
    metadata: dict
    verdicts: pd.DataFrame  # source, judge, criterion, value, rationale / note, p_pass


def _value_text(value: int | None, kind: str | None, pass_at: int | None) -> str:
    if value is None:
        return "unscored"
    if kind == "scale":
        return f"{value} ({'pass' if value >= (pass_at or 3) else 'fail'})"
    return "pass" if value else "fail"


def example_detail(s: Session, dataset_id: int, ext_id: str) -> ExampleDetail | None:
    """Texts of example ``ext_id`` plus the verdicts of every run of its dataset and every label on it."""
    ex = s.scalar(select(store.Example).where(store.Example.dataset_id == dataset_id, store.Example.ext_id == ext_id))
    if ex is None:
        return None
    V, C, R = store.Verdict, store.CriterionRow, store.Run
    run_ids = select(R.id).where(R.dataset_id == dataset_id)
    rows = []
    for run, judge, key, kind, pass_at, value, rationale, p_pass, error in s.execute(
        select(R, store.Judge, C.key, C.kind, C.pass_at, V.value, V.rationale, V.p_pass, V.error)
        .join(R, R.id == V.run_id)
        .join(store.Judge, store.Judge.id == R.judge_id)
        .join(C, C.id == V.criterion_id)
        .where(V.run_id.in_(run_ids), V.example_id == ex.id)
        .order_by(R.id, C.position)
    ):
        rows.append(
            {
                "source": f"run {run.name}",
                "judge": store.judge_label(judge),
                "criterion": key,
                "value": _value_text(value, kind, pass_at),
                "rationale / note": rationale if rationale is not None else (error or ""),
                "p_pass": p_pass,
            }
        )
    by_key = store.criteria_by_key(s)
    for crit, name, value, note in s.execute(
        select(store.Label.criterion, store.Annotator.name, store.Label.value, store.Label.note)
        .join(store.Annotator, store.Annotator.id == store.Label.annotator_id)
        .where(store.Label.example_id == ex.id)
        .order_by(store.Annotator.name, store.Label.criterion)
    ):
        c = by_key.get(crit, [None])[0]
        rows.append(
            {
                "source": f"annotator {name}",
                "judge": "human" if name != reports.REFERENCE_ANNOTATOR else "reference (planted truth)",
                "criterion": crit,
                "value": _value_text(value, c.kind if c else None, c.pass_at if c else None),
                "rationale / note": note or "",
                "p_pass": None,
            }
        )
    frame = pd.DataFrame(rows, columns=["source", "judge", "criterion", "value", "rationale / note", "p_pass"])
    return ExampleDetail(ex.ext_id, ex.question or "", ex.context or "", ex.answer or "", dict(ex.meta or {}), frame)


def render_example(detail: ExampleDetail | None, *, key: str) -> None:
    """An example's texts (``st.text``: never Markdown or HTML) and its verdicts/labels table."""
    if detail is None:
        st.info("That example is no longer in the dataset.", icon=":material/info:")
        return
    st.markdown(f"**Example** {md(detail.id)}")
    for label, text in (
        ("Question", detail.question),
        ("Context", detail.context),
        ("Answer", detail.answer),
    ):
        if len(text) > MAX_SHOWN_CHARS:  # the corpus allows multi-megabyte answers
            st.caption(f"{label} (first {MAX_SHOWN_CHARS:,} of {len(text):,} characters)")
            st.text(text[:MAX_SHOWN_CHARS])
        else:
            st.caption(label)
            st.text(text or "(empty)")
    st.caption(f"Verdicts and labels on this example ({len(detail.verdicts)})")
    st.dataframe(detail.verdicts, hide_index=True, key=key, width="stretch")


# --------------------------------------------------------------------------------------------- handoff


def open_crosstab(dataset_id: int, source_key: str, row: str, col: str) -> None:
    """Store the pair and the source for the Cross-tabs page and switch to it."""
    st.session_state[HANDOFF_KEY] = {"dataset_id": dataset_id, "source": source_key, "row": row, "col": col}
    st.switch_page("pages/crosstabs.py")


def take_handoff(prefix: str) -> None:
    """Apply a pending handoff (once) as the values of ``{prefix}_dataset``, ``_source``, ``_row`` and
    ``_col``; call it before the pickers are drawn (they fall back to their defaults if it is stale)."""
    h = st.session_state.pop(HANDOFF_KEY, None)
    if not h:
        return
    st.session_state[f"{prefix}_dataset"] = h["dataset_id"]
    st.session_state[f"{prefix}_source"] = h["source"]
    st.session_state[f"{prefix}_row"] = h["row"]
    st.session_state[f"{prefix}_col"] = h["col"]


def caption(ws: Workspace, key: str, n: int, what: str = "") -> None:
    """'run X — judge (simulated) — n = 120' under a view: every view names its judge and its n."""
    st.caption(md(f"{what}{ws.name(key)} — judge: {ws.judge(key)} — n = {n}"))


# ------------------------------------------------------------------------------------------ workspace page


def workspace_state(s: Session) -> tuple:
    """What the Workspace listing depends on: each dataset's fingerprint and each run's status row."""
    runs = tuple(tuple(r) for r in s.execute(
        select(store.Run.id, store.Run.status, store.Run.wall_s, store.Run.message).order_by(store.Run.id)))
    datasets = tuple(s.scalars(select(store.Dataset.id).order_by(store.Dataset.id)))
    rubrics = s.scalar(select(func.count()).select_from(store.RubricRow))
    return runs, rubrics, tuple((d, tuple(current_fingerprint(s, d))) for d in datasets)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _workspace_listing(db_url: str, state: tuple) -> tuple[list[dict], list[dict], list[dict]]:
    from judgekit import jobs

    with Session(store.engine_for(db_url)) as s:
        runs = store.list_runs(s)
        prices = reports.load_prices()
        for r in runs:
            run = store.get_run(s, r["id"])
            cost = reports.run_cost(s, run, prices)
            r.update(usd=cost.usd, calls=cost.calls, tokens=cost.prompt_tokens + cost.completion_tokens,
                     progress=jobs.stored_progress(s, run).fraction)
        return store.list_datasets(s), store.list_rubrics(s), runs


def workspace_listing() -> tuple[list[dict], list[dict], list[dict]]:
    """Datasets, rubrics and runs (with cost and progress) — recomputed only when the data changed."""
    with session() as s:
        state = workspace_state(s)
    return _workspace_listing(config.db_url(), state)


def endpoint_inputs(prefix: str) -> tuple[str, str, str]:
    """Base URL, model and the *name* of the key's environment variable of an OpenAI-compatible judge."""
    c1, c2, c3 = st.columns(3)
    base_url = c1.text_input("Base URL", value="https://api.openai.com/v1", key=f"{prefix}_base_url")
    model = c2.text_input("Model", value="gpt-4o-mini", key=f"{prefix}_model")
    api_key_env = c3.text_input("Name of the environment variable holding the key", value="OPENAI_API_KEY",
                                key=f"{prefix}_key_env", help="The key itself is never typed here, stored or logged.")
    return base_url, model, api_key_env
