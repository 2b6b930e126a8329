"""The examples × runs grid: rows are answers, columns the runs being compared (and the human column),
cells the verdicts of the chosen criteria — filtered, searched and paged on the server.

Where this sits in the flow: the caller loads each column's :class:`judgekit.reports.Source` (cached by the
dashboard) and the run's sample of examples, and hands them here with a :class:`GridQuery`. The filters
are vectorised over the sources' ``(n_examples, n_criteria)`` matrices, the text search is one bound-
parameter query (:func:`judgekit.store.search_examples`), and only the requested page's texts are read
from the store (:func:`judgekit.store.example_texts`). At 100k answers × 4 runs a page costs a few tens of
milliseconds plus the search, never a 100k-row table in the browser.

Cells say what the source said: ``pass`` / ``fail`` (a scale score with its pass/fail view, ``4 · pass``),
``unscored`` (a verdict row without a value: the judge's reply was not clearly a value), ``pending`` (in
the run's sample, not judged yet), and blank where the answer is not in the run's sample or not labelled.
With several criteria a cell names what failed by the criteria's numbers in :attr:`GridPage.criteria`
(``fail 2,6``; ``unscored 4``) or says ``all pass``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from judgekit import reports, store
from judgekit.rawtext import excerpt

__all__ = ["FILTERS", "Filter", "GridColumn", "GridPage", "GridQuery", "grid_mask", "grid_page"]

Filter = Literal["flips", "disagrees", "unscored"]
FILTERS: dict[Filter, str] = {
    "flips": "flips only (the runs disagree)",
    "disagrees": "disagrees with the humans",
    "unscored": "unscored",
}
"""The grid's filters and their labels. Several filters narrow together (an answer must pass each)."""

PAGE_SIZE = 25
CLIP = 160  # characters of a question / answer in a grid row; the whole text opens below the grid


@dataclass(frozen=True, eq=False)
class GridColumn:
    """One column of the grid: a run (``sample``: the rows of its examples; ``done``: finished) or a human
    source (``sample`` None: a blank cell means unlabelled)."""

    key: str
    name: str
    source: reports.Source
    sample: NDArray[np.bool_] | None = None
    done: bool = True

    @property
    def is_run(self) -> bool:
        return self.sample is not None


@dataclass(frozen=True)
class GridQuery:
    """What the grid shows: ``criteria`` (empty = all), ``filters`` (:data:`FILTERS`), ``text`` searched in
    ids, questions, contexts and answers, ``where`` — (column key, criterion, 1.0/0.0) conditions, e.g. the
    answers of one cross-tab cell — and whether only the answers the humans labelled count."""

    criteria: tuple[str, ...] = ()
    filters: frozenset[str] = frozenset()
    text: str = ""
    where: tuple[tuple[str, str, float], ...] = ()
    labelled_only: bool = False


@dataclass(frozen=True)
class GridPage:
    """One page of the grid: ``frame`` (id, question, answer, one column per source), the user ids of its
    rows, the number of answers that match, and the page (0-based) of ``pages``."""

    frame: pd.DataFrame
    ids: list[str]
    total: int
    page: int
    pages: int
    criteria: tuple[str, ...]
    notes: list[str] = field(default_factory=list)


def _criteria(columns: Sequence[GridColumn], wanted: Sequence[str]) -> tuple[str, ...]:
    every = list(dict.fromkeys(k for c in columns if c.is_run for k in c.source.keys))
    every = every or list(dict.fromkeys(k for c in columns for k in c.source.keys))
    return tuple(k for k in wanted if k in every) or tuple(every)


def _block(col: GridColumn, keys: Sequence[str]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(raw, binary) of ``col`` on ``keys`` (NaN columns for criteria it lacks)."""
    src = col.source.select(list(keys))
    return src.raw, src.binary


def grid_mask(columns: Sequence[GridColumn], query: GridQuery, *, searched: NDArray[np.bool_] | None = None
              ) -> tuple[NDArray[np.bool_], list[str]]:
    """The rows (examples, in the sources' index order) the grid shows, and notes on filters that could not
    apply. A row is shown when some run has it in its sample (or, without runs, some source has a value),
    and it passes every filter of ``query``:

    * ``flips`` — on some chosen criterion one run passes it and another fails it (needs two runs);
    * ``disagrees`` — on some chosen criterion a run's pass/fail differs from the human column's (the first
      human column; rows it did not label never match);
    * ``unscored`` — some run has an unscored (or pending) verdict on a chosen criterion;
    * ``where`` — each condition (column, criterion, value) holds; ``searched`` — the text search's rows;
    * ``labelled_only`` — the human column (the first human column) has a value on the row.
    """
    keys = _criteria(columns, query.criteria)
    runs = [c for c in columns if c.is_run]
    humans = [c for c in columns if not c.is_run]
    n = len(columns[0].source.index) if columns else 0
    notes: list[str] = []
    if runs:
        shown = np.logical_or.reduce([c.sample for c in runs])
    else:
        shown = np.logical_or.reduce([c.source.covered for c in columns]) if columns else np.zeros(0, bool)
    blocks = {c.key: _block(c, keys) for c in columns}
    if "flips" in query.filters:
        if len(runs) < 2:
            notes.append("'flips only' needs two runs among the columns")
        else:
            B = np.stack([blocks[c.key][1] for c in runs])  # (runs, n, k)
            shown &= ((B == 1.0).any(axis=0) & (B == 0.0).any(axis=0)).any(axis=1)
    if "disagrees" in query.filters:
        if not humans or not runs:
            notes.append("'disagrees with the humans' needs a run and the human column among the columns")
        else:
            H = blocks[humans[0].key][1]
            B = np.stack([blocks[c.key][1] for c in runs])
            with np.errstate(invalid="ignore"):
                shown &= ((B != H) & ~np.isnan(B) & ~np.isnan(H)).any(axis=(0, 2))
    if "unscored" in query.filters:
        if not runs:
            notes.append("'unscored' needs a run among the columns")
        else:
            open_ = np.zeros(n, dtype=bool)
            for c in runs:
                open_ |= c.sample & np.isnan(blocks[c.key][0]).any(axis=1)
            shown &= open_
    by_key = {c.key: c for c in columns}
    for key, crit, value in query.where:
        col = by_key.get(key)
        if col is None:
            notes.append(f"the condition on {crit} names a source that is not among the columns")
            continue
        binary = col.source.select([crit]).binary[:, 0]
        shown &= binary == value
    if query.labelled_only:
        if humans:
            shown &= humans[0].source.covered
        else:
            notes.append("'only the labelled answers' needs the human column among the columns")
    if searched is not None:
        shown &= searched
    return shown, notes


def _cell(col: GridColumn, raw: NDArray[np.float64], binary: NDArray[np.float64], row: int,
          keys: Sequence[str], kinds: Sequence[str]) -> str:
    """What ``col`` says about one row on ``keys`` (see the module docstring)."""
    if col.is_run and not col.sample[row]:
        return ""
    values = raw[row]
    if not col.is_run and np.isnan(values).all():
        return ""
    missing = "unscored" if (col.done or not col.is_run) else "pending"
    if not col.is_run:
        missing = "unresolved"

    def one(j: int) -> str:
        v, b = values[j], binary[row, j]
        if math.isnan(v) and math.isnan(b):
            return missing
        outcome = "pass" if b == 1.0 else "fail" if b == 0.0 else missing
        return f"{int(v)} · {outcome}" if kinds[j] == "scale" and not math.isnan(v) else outcome

    if len(keys) == 1:
        return one(0)
    texts = [one(j) for j in range(len(keys))]
    failed = [str(j + 1) for j, t in enumerate(texts) if t.endswith("fail")]
    open_ = [str(j + 1) for j, t in enumerate(texts) if t == missing]
    if not failed and not open_:
        return "all pass"
    parts = [f"fail {','.join(failed)}"] if failed else []
    if open_:
        parts.append(f"{missing} {','.join(open_)}")
    return "; ".join(parts)


def grid_page(s: Session, columns: Sequence[GridColumn], query: GridQuery, page: int = 0,
              page_size: int = PAGE_SIZE) -> GridPage:
    """One page of the grid for ``query`` over ``columns`` (all on one dataset): the texts of that page's
    answers only are read from the store; the search is one query (see :func:`grid_mask`)."""
    if not columns:
        return GridPage(pd.DataFrame(columns=["id", "question", "answer"]), [], 0, 0, 0, ())
    index = columns[0].source.index
    keys = _criteria(columns, query.criteria)
    searched = None
    if query.text.strip():
        hits = np.asarray(store.search_examples(s, index.dataset_id, query.text.strip()), dtype=np.int64)
        searched = np.zeros(len(index), dtype=bool)
        searched[index.rows_of(hits)] = True
    shown, notes = grid_mask(columns, query, searched=searched)
    rows = np.flatnonzero(shown)
    pages = max(1, math.ceil(rows.size / page_size))
    page = min(max(0, page), pages - 1)
    chunk = rows[page * page_size : (page + 1) * page_size]
    ids = index.ext_ids(chunk)
    texts = store.example_texts(s, index.dataset_id, ids)
    data: dict[str, list[str]] = {
        "id": ids,
        "question": [excerpt(texts.get(e, ("", "", ""))[0], CLIP) for e in ids],
        "answer": [excerpt(texts.get(e, ("", "", ""))[2], CLIP) for e in ids],
    }
    for col in columns:
        src = col.source.select(list(keys))
        kinds = [c.kind for c in src.criteria]
        raw, binary = src.raw, src.binary
        data[col.name] = [_cell(col, raw, binary, int(r), keys, kinds) for r in chunk]
    return GridPage(pd.DataFrame(data), ids, int(rows.size), page, pages, keys, notes)


