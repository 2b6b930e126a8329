"""Helpers for the analysis pages (Cross-tabs, Associations, Compare, Agreement).

Where this sits in the flow: a page reads its widgets, asks this module for a :class:`Workspace` (the
chosen dataset, its runs and annotators, and a cheap *data fingerprint*), loads the sources it shows
through the cached loaders here, calls :mod:`judgekit.reports`, and renders with the builders here.

Caching: the versions every cached thing is keyed by, and the loaded sources themselves, are
:mod:`judgekit.sources`' (:class:`~judgekit.sources.Versions`, :func:`~judgekit.sources.shared_source`: one
read-only source per version, shared by every session). This module memoises only the views built from
them -- phi matrices and the audit, comparisons, agreement, grid pages -- with ``st.cache_data`` keyed by
the sources' versions (:meth:`Workspace.fp`). When a run progresses or someone labels, a version moves and
the next render rebuilds just what changed; otherwise a re-render is a cache hit.

Safety: answers, questions, contexts, rationales, notes, run / dataset / annotator / judge names are
untrusted text. They are rendered with ``st.text`` / ``st.code`` / ``st.dataframe`` or escaped with
:func:`md` before they reach Markdown, and escaped with :func:`html.escape` before they reach plotly
(whose titles understand a few HTML tags). Nothing here uses ``unsafe_allow_html``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import streamlit as st
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import config, figures, findings, grid, noise, reports, store, webapp
from judgekit.annotators import REFERENCE_ANNOTATOR
from judgekit.figures import (  # noqa: F401 - the pure builders live in figures; pages import them from here
    CHAR_PX,
    CONTENT_PX,
    COUNT,
    SECONDS,
    USD,
    agreement_frame,
    annotator_frames,
    attribution_figure,
    audit_frame,
    audit_summary,
    cost_frame,
    cost_vs_agreement_figure,
    crosstab_table,
    diff_heatmap,
    flips_frame,
    fmt,
    kappa_figure,
    kappa_notes,
    matrix_figure,
    phi_heatmap,
    phi_panels,
    pooled_frame,
    verdict_marks,
    with_run_names,
)
from judgekit.rawtext import excerpt
from judgekit.rubric import value_text
from judgekit.sources import Versions, aligned, current_versions, shared_source
from judgekit.webapp import empty_state, md, session  # noqa: F401 - md: public here too (ui.md)

__all__ = [
    "endpoint_inputs",
    "page_workspace",
    "ExampleDetail",
    "PhiView",
    "RunInfo",
    "Workspace",
    "agreement",
    "agreement_frame",
    "kappa_notes",
    "pooled_frame",
    "audit_summary",
    "audit_sentences",
    "annotator_agreement",
    "annotator_frames",
    "attribution_figure",
    "audit_frame",
    "compare",
    "cost_frame",
    "cost_vs_agreement",
    "cost_vs_agreement_figure",
    "criteria_of",
    "crosstab_sentence",
    "grid_columns_config",
    "grid_style",
    "crosstab_table",
    "diff_heatmap",
    "caption",
    "who",
    "download_report",
    "example_detail",
    "example_texts",
    "flag",
    "flips_frame",
    "human_keys",
    "labelled_toggle",
    "pick_many",
    "fmt",
    "grid_columns",
    "grid_page",
    "kappa_figure",
    "load_workspace",
    "md",
    "no_labels",
    "no_runs",
    "open_page",
    "phi",
    "matrix_figure",
    "phi_panels",
    "verdict_marks",
    "pick",
    "pager",
    "page_number",
    "pills",
    "text",
    "points",
    "ratio_sentence",
    "page_message",
    "render_example",
    "show_endpoint_check",
    "report_html",
    "source",
    "story",
    "story_runs",
    "sources",
    "undefined_phi",
    "workspace",
]

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
CACHE_ENTRIES = 32  # derived results (phi views, comparisons, agreement, samples): small


# --------------------------------------------------------------------------------------------- text


def audit_sentences(report: reports.PhiReport, names: dict[str, str]) -> list[str]:
    """Each pair's verdict with its evidence in words, as inert Markdown lines (criterion keys and run
    names come from files: escaped)."""
    return [f"**{md(f'{a.a} × {a.b}')}** — {md(with_run_names(a.note, names))}" for a in report.audit]


def points(a: float, b: float) -> str | None:
    """The change from rate ``a`` to rate ``b`` in percentage points (``None`` if either is undefined)."""
    return f"{(b - a) * 100:+.1f} points" if math.isfinite(a) and math.isfinite(b) else None


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
    runs: tuple[RunInfo, ...]
    annotators: tuple[str, ...]
    versions: Versions = field(hash=False)  # compared, not hashed (it holds a dict)

    @property
    def examples(self) -> int:
        """How many answers the dataset has."""
        return self.versions.examples[0]

    @property
    def labels_fp(self) -> tuple:
        """The labels' version (keys the views built from labels only)."""
        return self.versions.database, *self.versions.labels

    @property
    def examples_fp(self) -> tuple:
        """The examples' version (keys the views built from the examples only)."""
        return self.versions.database, *self.versions.examples

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
        """A view's cache key for one source: the source's version (:meth:`judgekit.sources.Versions.of`) and,
        for a run, its status and wall time (the cost views show them)."""
        if key.startswith("run:"):
            r = self.run(key)
            return self.versions.of(key), r.status, r.wall_s
        return (self.versions.of(key),)

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
            others = [a for a in self.annotators if a != REFERENCE_ANNOTATOR]
            if not others:
                return "labels of reference (the demo's planted truth)"
            if len(others) == 1:
                return f"labels of {others[0]}"
            return f"consensus of {', '.join(others)} (ties unresolved)"
        return f"labels of {key.split(':', 1)[1]}"

    def label(self, key: str) -> str:
        """Picker label: name, judge and (for runs) harness."""
        if key.startswith("run:"):
            r = self.run(key)
            return f"{r.name} — {r.judge} · {r.harness or 'imported'}"
        return f"{self.name(key)} — {self.judge(key)}"


def load_workspace(s: Session, dataset_id: int, fp: Versions, annotators: Sequence[str]) -> Workspace:
    """The runs of a dataset at versions ``fp`` (small queries; no verdict is read)."""
    ds = s.get(store.Dataset, dataset_id)
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
        if store.run_level(run) == "answer"  # bundle-level runs have no per-answer verdicts to analyse here
    )
    return Workspace(config.db_url(), ds.name, ds.id, runs, tuple(annotators), fp)


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
    by_name = {d["name"]: d for d in datasets}
    if len(datasets) > 1:
        default = max(datasets, key=lambda d: (run_counts.get(d["id"], 0), -d["id"]))["name"]
        name = pick(
            "Dataset",
            list(by_name),
            key=f"{prefix}_dataset",
            default=default,
            param="dataset",
            format_func=lambda n: (
                f"{n} ({by_name[n]['examples']:,} examples, {run_counts.get(by_name[n]['id'], 0)} runs)"
            ),
        )
    else:
        name = datasets[0]["name"]
        webapp.remember("dataset", name)
    dataset_id = by_name[name]["id"]
    with session() as s:
        fp = current_versions(s, dataset_id)
        annotators = _annotators(config.db_url(), dataset_id, (fp.database, *fp.labels))
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


def pick(
    label: str, options: Sequence, *, key: str, default: Any = None, widget=None, param: str | None = None, **kwargs
) -> Any:
    """A select widget whose state lives under ``key``: a stale or missing value falls back to
    ``default`` (or the first option) *before* the widget is created, so no ``index`` is ever passed.

    With ``param``, the choice is shared: a fresh widget starts from the URL's ``?param=`` or from what was
    chosen under that name on another page (:func:`webapp.remembered`), and the choice is written back to
    both (:func:`webapp.remember`)."""
    options = list(options)
    if st.session_state.get(key) not in options:
        shared = webapp.remembered(param, options) if param else None
        if shared is not None:
            st.session_state[key] = shared
        else:
            st.session_state[key] = default if default in options else (options[0] if options else None)
    else:  # set again: a widget a run did not draw would otherwise come back at its default (webapp.keep)
        st.session_state[key] = st.session_state[key]
    value = (widget or st.selectbox)(label, options, key=key, **kwargs)
    if param:
        webapp.remember(param, value)
    return value


def pick_ab_pair(candidates: Sequence[dict], *, what: str, key: str, describe: Callable[[dict], str],
                 same: Sequence[str], no_partner: Callable[[dict], str]) -> tuple[dict, dict] | None:
    """Runs A and B of a Prompt A/B, side by side: A from every candidate (:func:`judgekit.scale.ab_candidates`),
    B from those that share A's ``same`` fields (dataset, rubric, bundles …), the same judge with another
    prompt variant first. ``None``, with ``no_partner(A)`` said, where A has no partner."""
    by_name = {c["name"]: c for c in candidates}

    def label(name: str) -> str:
        return f"{name} — {describe(by_name[name])}"

    c1, c2 = st.columns(2)
    a = by_name[c1.selectbox(f"{what} A", list(by_name), key=f"{key}_a", format_func=label)]
    partners = [c for c in candidates if c["name"] != a["name"] and all(c[f] == a[f] for f in same)]
    if not partners:
        st.info(md(no_partner(a)), icon=":material/info:")
        return None
    partners.sort(key=lambda c: (c["judge_id"] != a["judge_id"], c["variant"] == a["variant"]))
    b = c2.selectbox(f"{what} B", [c["name"] for c in partners], key=f"{key}_b", format_func=label)
    return a, by_name[b]


def pick_many(
    label: str, options: Sequence, *, key: str, default: Sequence, param: str | None = None, **kwargs
) -> list:
    """A multiselect with :func:`pick`'s rules: stale choices dropped, shared under ``param``."""
    options = list(options)
    if key in st.session_state:
        st.session_state[key] = [k for k in st.session_state[key] if k in options]
    else:
        shared = webapp.remembered(param, options, multi=True) if param else None
        st.session_state[key] = shared if shared is not None else [k for k in default if k in options]
    value = st.multiselect(label, options, key=key, **kwargs)
    if param:
        webapp.remember(param, value)
    return value


def text(label: str, *, key: str, param: str | None = None, **kwargs) -> str:
    """A text input whose first value is the URL's / session's ``param`` (shared like :func:`pick`)."""
    if key not in st.session_state:
        shared = st.query_params.get(param) if param else None
        if shared is None and param:
            shared = st.session_state.get(webapp.SHARED, {}).get(param)
        st.session_state[key] = shared or ""
    else:
        st.session_state[key] = st.session_state[key]
    value = st.text_input(label, key=key, **kwargs)
    if param:
        webapp.remember(param, value or None)
    return value


def pills(label: str, options: Sequence, *, key: str, param: str | None = None, **kwargs) -> list:
    """Multi-select pills whose first value is the URL's / session's ``param`` (shared like :func:`pick`)."""
    options = list(options)
    if key not in st.session_state:
        shared = webapp.remembered(param, options, multi=True) if param else None
        st.session_state[key] = shared or []
    else:
        st.session_state[key] = [v for v in st.session_state[key] or [] if v in options]
    value = st.pills(label, options, key=key, selection_mode="multi", **kwargs) or []
    if param:
        webapp.remember(param, value)
    return value


def page_number(*, key: str) -> int:
    """The page (0-based) a paged view shows: kept under ``key``, first read from the URL's ``?page=`` (1-based)."""
    if key not in st.session_state:
        try:
            st.session_state[key] = max(0, int(st.query_params.get("page", "1")) - 1)
        except ValueError:
            st.session_state[key] = 0
    return int(st.session_state[key])


def pager(page: int, pages: int, *, key: str) -> None:
    """Previous / next buttons and "page x of y" under a paged view (the page lives under ``key``)."""
    if st.session_state.get(key) != page:  # clamped by the query (e.g. fewer pages than the URL said)
        st.session_state[key] = page
    if page:
        st.query_params["page"] = str(page + 1)
    elif "page" in st.query_params:
        del st.query_params["page"]
    if pages <= 1:
        return

    def go(to: int) -> None:
        st.session_state[key] = to

    c1, c2, c3, _ = st.columns([1, 2, 1, 4], vertical_alignment="center")
    c1.button("Previous", key=f"{key}_prev", disabled=page == 0, on_click=go, args=(page - 1,),
              icon=":material/chevron_left:", width="stretch")
    c2.caption(f"page {page + 1:,} of {pages:,}")
    c3.button("Next", key=f"{key}_next", disabled=page >= pages - 1, on_click=go, args=(page + 1,),
              icon=":material/chevron_right:", width="stretch")


# --------------------------------------------------------------------------------------------- loading


def _many(db_url: str, dataset_id: int, keys: Sequence[str], of: Versions) -> list[reports.Source]:
    """The sources ``keys`` at versions ``of``, shared (:func:`judgekit.sources.shared_source`)."""
    with Session(store.engine_for(db_url)) as s:
        return [shared_source(s, dataset_id, k, of) for k in keys]


def source(ws: Workspace, key: str, *, labelled_only: bool = False) -> reports.Source:
    """One source, loaded once per fingerprint (cached); with ``labelled_only``, over the answers the humans
    labelled only."""
    src = _many(ws.db_url, ws.dataset_id, [key], ws.versions)[0]
    if labelled_only and ws.has_labels:
        src = _labelled_only(ws.db_url, ws.dataset_id, ws.versions, [key], [src])[0]
    return src


def flag(label: str, *, key: str, default: bool, param: str | None = None, **kwargs) -> bool:
    """A toggle whose first value is the URL's / session's choice under ``param``, else ``default``."""
    if key not in st.session_state:
        shared = webapp.remembered(param, [True, False]) if param else None
        st.session_state[key] = default if shared is None else shared
    else:
        st.session_state[key] = st.session_state[key]
    value = st.toggle(label, key=key, **kwargs)
    if param:
        webapp.remember(param, value)
    return value


def labelled_toggle(ws: Workspace, *, key: str, default: bool) -> bool:
    """"Only the labelled answers" (``False`` without labels): a run's numbers over every answer beside the
    humans' over the labelled ones are not a fair comparison. Pages default it on when humans are shown."""
    if not ws.has_labels:
        return False
    return flag("Only the labelled answers", key=key, default=default, param="labelled",
                help="Restrict every source to the answers the humans labelled, so all are counted on the same "
                     "answers; each view prints its n.")


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _sample_rows(db_url: str, dataset_id: int, run_id: int, examples_fp: tuple) -> np.ndarray:
    """The rows (in the example index's order) of a run's sample of examples."""
    with Session(store.engine_for(db_url)) as s:
        # examples_fp keys this memo; the index has its own
        return reports.run_sample(s, s.get(store.Run, run_id), reports.example_index(s, dataset_id))


def grid_columns(ws: Workspace, keys: Sequence[str]) -> list[grid.GridColumn]:
    """The grid's columns for the sources ``keys`` (loaded through the per-source cache)."""
    srcs = _many(ws.db_url, ws.dataset_id, keys, ws.versions)
    out = []
    for key, src in zip(keys, srcs, strict=True):
        if key.startswith("run:"):
            run = ws.run(key)
            sample = _sample_rows(ws.db_url, ws.dataset_id, run.id, ws.examples_fp)
            out.append(grid.GridColumn(key, run.name, src, sample, done=run.status in ("done", "imported")))
        else:
            out.append(grid.GridColumn(key, ws.name(key), src))
    return out


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _grid(db_url: str, dataset_id: int, keys: tuple[str, ...], fps: tuple, query: grid.GridQuery, page: int,
          _ws: Workspace) -> grid.GridPage:
    with Session(store.engine_for(db_url)) as s:
        return grid.grid_page(s, grid_columns(_ws, keys), query, page)


def grid_page(ws: Workspace, keys: Sequence[str], query: grid.GridQuery, page: int) -> grid.GridPage:
    """One page of the examples × runs grid (cached per data fingerprint, query and page)."""
    keys = tuple(keys)
    return _grid(ws.db_url, ws.dataset_id, keys, tuple(ws.fp(k) for k in keys), query, page, ws)


def sources(ws: Workspace, keys: Sequence[str]) -> list[reports.Source]:
    """Several sources aligned on one criteria list (each loaded through the per-source cache)."""
    return aligned(_many(ws.db_url, ws.dataset_id, keys, ws.versions))


def human_keys(keys: Sequence[str]) -> list[str]:
    """The human sources among ``keys`` (the human column, annotators)."""
    return [k for k in keys if not k.startswith("run:")]


def _labelled_rows(db_url: str, dataset_id: int, of: Versions, keys: Sequence[str], srcs: Sequence[reports.Source]
                   ) -> np.ndarray:
    """The answers the humans labelled: those with a value in any human source among ``keys``, else in the
    human column (at versions ``of``)."""
    humans = [src for k, src in zip(keys, srcs, strict=True) if not k.startswith("run:")]
    if not humans:
        humans = _many(db_url, dataset_id, ["human"], of)
    return np.logical_or.reduce([h.covered for h in humans])


def _labelled_only(db_url: str, dataset_id: int, of: Versions, keys: Sequence[str], srcs: list[reports.Source]
                   ) -> list[reports.Source]:
    """``srcs`` restricted to the answers the humans labelled (:func:`_labelled_rows`)."""
    rows = _labelled_rows(db_url, dataset_id, of, keys, srcs)
    return [src.only(rows) for src in srcs]


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Computing phi, intervals and the audit…")
def _phi(
    db_url: str, dataset_id: int, keys: tuple[str, ...], names: tuple[str, ...], fps: tuple, n_boot: int,
    labelled_fp: tuple | None, _of: Versions,
) -> PhiView:
    srcs = aligned(_many(db_url, dataset_id, keys, _of))
    rows = None
    if labelled_fp is not None:
        # The matrices count the labelled answers only; the audit keeps every answer each run scored: it
        # compares runs paired on the same answers and post-stratifies the humans on the reference run's
        # cells, so it is fair across unequal samples already, and the labelled answers alone lose it power.
        rows = _labelled_rows(db_url, dataset_id, _of, keys, srcs)
    with Session(store.engine_for(db_url)) as s:
        floor = noise.find_floor(s, srcs)
    report = reports.phi_report(srcs, n_boot=n_boot, matrices_over=rows, names=names, noise_floor=floor)
    return PhiView(report, tuple(col.criterion_notes for col in report.columns))


class PhiView(NamedTuple):
    """A phi report and, per source (in order), why some criteria have no phi (its columns' ``criterion_notes``)."""

    report: reports.PhiReport
    notes: tuple[dict[str, str], ...]


def phi(ws: Workspace, keys: Sequence[str], n_boot: int = 1000, *, labelled_only: bool = False) -> PhiView:
    """Phi matrices with 95 % intervals, the association audit, and the undefined-phi sentences for the
    sources ``keys`` (cached: a re-render unpickles one small object, not the sources). With
    ``labelled_only`` the matrices count only the answers the humans labelled; the audit always counts every
    answer (see :mod:`judgekit.audit`)."""
    keys = tuple(keys)
    names = tuple(ws.name(k) for k in keys)
    labelled_fp = ws.fp("human") if labelled_only and ws.has_labels else None
    return _phi(ws.db_url, ws.dataset_id, keys, names, tuple(ws.fp(k) for k in keys), n_boot, labelled_fp,
                ws.versions)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Comparing runs…")
def _compare(db_url: str, dataset_id: int, a: str, b: str, fps: tuple, labelled_fp: tuple | None, _of: Versions
             ) -> reports.CompareReport:
    A, B = _many(db_url, dataset_id, (a, b), _of)
    if labelled_fp is not None:
        A, B = _labelled_only(db_url, dataset_id, _of, (a, b), [A, B])
    with Session(store.engine_for(db_url)) as s:
        return reports.compare_sources(s, A, B)


def compare(ws: Workspace, a: str, b: str, *, labelled_only: bool = False) -> reports.CompareReport:
    """Flips, McNemar, attribution, all-pass rates and cost of two runs (cached); with ``labelled_only``
    the flips and rates count the answers the humans labelled only (the cost is the whole runs')."""
    labelled_fp = ws.fp("human") if labelled_only and ws.has_labels else None
    return _compare(ws.db_url, ws.dataset_id, a, b, (ws.fp(a), ws.fp(b)), labelled_fp, ws.versions)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _agreement(db_url: str, dataset_id: int, judge: str, ref: str, fps: tuple, labelled_fp: tuple | None,
               _of: Versions) -> reports.AgreementReport:
    J, R = _many(db_url, dataset_id, (judge, ref), _of)
    if labelled_fp is not None:
        J, R = _labelled_only(db_url, dataset_id, _of, (judge, ref), [J, R])
    if judge.startswith("run:") and ref.startswith("run:"):
        keys = [k for k in J.keys if k in set(R.keys)]  # judge vs judge: the criteria both rubrics have
        return reports.agreement_report(J.select(keys), R.select(keys))
    return reports.agreement_report(J, R)


def agreement(ws: Workspace, judge: str, ref: str, *, labelled_only: bool = False) -> reports.AgreementReport:
    """Agreement of source ``judge`` with reference ``ref`` (the human column, an annotator or a run);
    with ``labelled_only``, over the answers the humans labelled."""
    labelled_fp = ws.fp("human") if labelled_only and ws.has_labels else None
    return _agreement(ws.db_url, ws.dataset_id, judge, ref, (ws.fp(judge), ws.fp(ref)), labelled_fp, ws.versions)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _annotator_agreement(
    db_url: str, dataset_id: int, labels_fp: tuple, include_reference: bool
) -> reports.AnnotatorAgreement | None:
    with Session(store.engine_for(db_url)) as s:
        ds = s.get(store.Dataset, dataset_id)
        return reports.annotator_agreement(s, ds, include_reference=include_reference)


def annotator_agreement(ws: Workspace, include_reference: bool = False) -> reports.AnnotatorAgreement | None:
    names = [a for a in ws.annotators if include_reference or a != REFERENCE_ANNOTATOR]
    if len(names) < 2:
        return None
    return _annotator_agreement(ws.db_url, ws.dataset_id, ws.labels_fp, include_reference)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Scoring every run against the human column…")
def _cost_vs_agreement(db_url: str, dataset_id: int, runs: tuple[RunInfo, ...], fps: tuple, _of: Versions
                       ) -> pd.DataFrame:
    human, *srcs = _many(db_url, dataset_id, ["human", *(r.key for r in runs)], _of)
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
                "usd": reports.totals_cost(r.totals, r.judge_kind, r.model, prices)[0],
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
    return _cost_vs_agreement(ws.db_url, ws.dataset_id, ws.runs, fps, ws.versions)


STORY_RUNS = 4  # the first screen's findings cover the latest runs of one rubric


def story_runs(ws: Workspace) -> list[RunInfo]:
    """The runs the first screen speaks about: the latest :data:`STORY_RUNS` runs of the rubric of the
    dataset's latest run (runs of one rubric share their criteria)."""
    if not ws.runs:
        return []
    rubric = ws.runs[-1].rubric
    return [r for r in ws.runs if r.rubric == rubric][-STORY_RUNS:]


def story(ws: Workspace) -> list[findings.Finding]:
    """The workspace's findings (:func:`findings.findings`) from the cached phi report's audit and the cached
    cost-vs-agreement table."""
    runs = story_runs(ws)
    if not runs:
        return []
    keys = [r.key for r in runs] + (["human"] if ws.has_labels else [])
    report = phi(ws, keys).report  # the audit counts every answer whatever "only the labelled answers" says
    prices = reports.load_prices()
    kappa = cost_vs_agreement(ws).set_index("run") if ws.has_labels else None
    facts = []
    for r in runs:
        t = r.totals
        row = kappa.loc[r.name] if kappa is not None and r.name in kappa.index else None
        facts.append(findings.RunFacts(
            key=r.key, name=r.name, harness=(r.harness or "imported").split(" ")[0].split(":")[0],
            calls=int(t.get("calls") or 0),
            tokens=int(t.get("prompt_tokens") or 0) + int(t.get("completion_tokens") or 0),
            usd=reports.totals_cost(t, r.judge_kind, r.model, prices)[0],
            mean_kappa=float(row["mean_kappa"]) if row is not None else math.nan,
            kappa_criteria=int(row["criteria"]) if row is not None else 0,
            n_labelled=int(row["n"]) if row is not None else 0,
        ))
    source_of = {f"run:{r.name}": r.key for r in runs}
    return findings.findings(report, facts, source_of)


def report_html(db_url: str, dataset: str, runs: Sequence[str], human: bool) -> bytes:
    """The exported HTML report (:func:`reports.build_report` → :func:`figures.render_html`).

    Plain function (no Streamlit): pages hand it to ``st.download_button`` as a deferred callable, so the
    report is only built when someone clicks.
    """
    with Session(store.engine_for(db_url)) as s:
        has_labels = bool(store.annotators_for_dataset(s, store.get_dataset(s, dataset).id))
        from judgekit import health

        rep = reports.build_report(s, list(runs) or None, human=human and has_labels, dataset=dataset,
                                   sections=health.export_sections)
    return figures.render_html(rep).encode("utf-8")


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
    ids = list(ext_ids)
    found = store.example_texts(s, dataset_id, ids)
    return pd.DataFrame(
        [
            {
                "id": e,
                "question": excerpt(found[e][0], 200),
                "context": excerpt(found[e][1], 200),
                "answer": excerpt(found[e][2], 300),
            }
            for e in ids
            if e in found
        ],
        columns=["id", "question", "context", "answer"],
    )


_CELL_COLOURS = (("fail", "#fbd5d5"), ("unscored", "#fde9c4"), ("pending", "#eeeeee"), ("unresolved", "#fde9c4"),
                 ("pass", "#d7f0dc"))


def _cell_colour(value: Any) -> str:
    text = str(value)
    for word, colour in _CELL_COLOURS:
        if word in text:
            return f"background-color: {colour}"
    return ""


def grid_style(frame: pd.DataFrame):
    """The grid's frame with its verdict cells coloured: fail red, unscored / unresolved amber, pass green."""
    verdicts = [c for c in frame.columns if c not in ("id", "question", "answer")]
    return frame.style.map(_cell_colour, subset=verdicts)


def grid_columns_config(frame: pd.DataFrame) -> tuple[dict, list[str]]:
    """Column widths and order for the grid at :data:`CONTENT_PX`: every verdict column in view first, then
    the id and the answer, and the question too when there is room (a cell's whole text shows on hover;
    the whole example opens below the grid)."""
    verdicts = list(frame.columns[3:])
    widest = max([len(str(v)) for c in verdicts for v in frame[c]] + [len(c) for c in verdicts] + [6])
    room = CONTENT_PX - 40 - 70  # the row picker and the id
    each = int(max(80, min(CHAR_PX * widest + 20, (room - 200) / max(1, len(verdicts)))))
    rest = room - each * len(verdicts)
    order = ["id", "question", "answer", *verdicts] if rest >= 360 else ["id", "answer", *verdicts]
    config = {"id": st.column_config.TextColumn("id", width=70),
              "question": st.column_config.TextColumn("question", width=int(rest * 0.4)),
              "answer": st.column_config.TextColumn("answer", width=int(rest * 0.6 if rest >= 360 else rest))}
    for c in verdicts:
        config[c] = st.column_config.TextColumn(c, width=each)
    return config, order


def criteria_of(ws: Workspace, keys: Sequence[str]) -> list[str]:
    """The criteria the sources ``keys`` share a view on (the runs' criteria, in order)."""
    return sources(ws, keys)[0].keys if keys else []


@dataclass(frozen=True)
class ExampleDetail:
    """One example's texts and every verdict and label on it."""

    id: str
    question: str
    context: str
    answer: str
    metadata: dict
    verdicts: pd.DataFrame  # source, judge, criterion, value, rationale / note, p_pass


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
                "value": value_text(value, kind, pass_at, binary_view=True),
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
                "judge": "human" if name != REFERENCE_ANNOTATOR else "reference (planted truth)",
                "criterion": crit,
                "value": value_text(value, c.kind if c else None, c.pass_at if c else None, binary_view=True),
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


def examples_list(ws: Workspace, ids: Sequence[str], *, prefix: str, table_key: str, caption: str,
                  examples_link: dict[str, Any], link_help: str) -> None:
    """Answers picked on a page (a cell, a flip): ``caption``, the first 200 with their texts, a button that
    opens them in Examples (``examples_link``: its URL choices), and one of them to read in full."""
    shown = ids[:200]
    with session() as s:
        texts = example_texts(s, ws.dataset_id, shown)
    c1, c2 = st.columns([3, 1], vertical_alignment="center")
    c1.caption(md(f"{caption}; showing the first {len(shown):,}."))
    with c2:
        if st.button("Open in Examples", key=f"{prefix}_open_examples", icon=":material/table_rows:", help=link_help):
            open_page("pages/examples.py", dataset=ws.dataset, **examples_link)
    st.dataframe(texts, hide_index=True, key=table_key, width="stretch")
    chosen = pick("Read one example", ids[:1000], key=f"{prefix}_example")
    with session() as s:
        detail = example_detail(s, ws.dataset_id, chosen)
    render_example(detail, key=f"{prefix}_detail")


# --------------------------------------------------------------------------------------------- handoff


def open_page(page: str, **params: Any) -> None:
    """Switch to ``page`` with the choices ``params`` in its URL (``?dataset=…&row=…``; lists repeat the
    key): its pickers start from them (``pick(param=…)``), and the view can be shared as a link."""
    query = {k: [str(x) for x in v] if isinstance(v, list | tuple) else str(v) for k, v in params.items()
             if v is not None}
    st.switch_page(page, query_params=query)


def who(ws: Workspace, key: str) -> str:
    """Who produced a source, for a caption: "judge: X (simulated)" for a run, "labels of ana" for humans."""
    return f"judge: {ws.judge(key)}" if key.startswith("run:") else ws.judge(key)


def caption(ws: Workspace, key: str, n: int, what: str = "") -> None:
    """'run X — judge: … (simulated) — n = 120' under a view: every view names its judge and its n."""
    st.caption(md(f"{what}{ws.name(key)} — {who(ws, key)} — n = {n:,}"))


# ------------------------------------------------------------------------------------------ workspace page


def workspace_state(s: Session) -> tuple:
    """What the Workspace listing depends on: each dataset's fingerprint and each run's status row."""
    runs = tuple(tuple(r) for r in s.execute(
        select(store.Run.id, store.Run.status, store.Run.wall_s, store.Run.message).order_by(store.Run.id)))
    datasets = tuple(s.scalars(select(store.Dataset.id).order_by(store.Dataset.id)))
    rubrics = s.scalar(select(func.count()).select_from(store.RubricRow))
    return runs, rubrics, tuple((d, tuple(current_versions(s, d))) for d in datasets)


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
    """Base URL, model and the *name* of the key's environment variable of an OpenAI-compatible judge
    (kept when the user leaves the page)."""
    c1, c2, c3 = st.columns(3)
    webapp.keep(f"{prefix}_base_url", "https://api.openai.com/v1")
    webapp.keep(f"{prefix}_model", "gpt-4o-mini")
    webapp.keep(f"{prefix}_key_env", "OPENAI_API_KEY")
    base_url = c1.text_input("Base URL", key=f"{prefix}_base_url")
    model = c2.text_input("Model", key=f"{prefix}_model")
    api_key_env = c3.text_input("Name of the environment variable holding the key", key=f"{prefix}_key_env",
                                help="The key itself is never typed here, stored or logged.")
    return base_url, model, api_key_env


_CLI_RESUME = re.compile(r"(Resume with )?`judgekit resume [^`]*`")


def page_message(message: str) -> str:
    """A run's stored message as a page says it: the command-line resume hint becomes the Resume button."""
    return _CLI_RESUME.sub("press Resume", message)


def show_endpoint_check(check) -> None:
    """The steps of an endpoint check (:func:`judgekit.endpoint_check.check_endpoint`), one line each."""
    for step in check.steps:
        (st.success if step.ok else st.error)(md(f"{step.name}: {step.detail}"),
                                              icon=":material/check:" if step.ok else ":material/close:")
