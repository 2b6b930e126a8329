"""The Python API for notebooks: ``judgekit.open(url)`` → a :class:`Workspace`.

Each method opens one short session, calls the same report functions as ``judgekit report …`` and the
dashboard (:mod:`judgekit.reports`, :mod:`judgekit.gates`), and returns the report object itself, with
``.to_dict()`` (the CLI's ``--format json``), ``.to_frame()`` (pandas) and ``.figure()`` (plotly, drawn by
:mod:`judgekit.figures` like the pages)::

    import judgekit
    ws = judgekit.open("sqlite:///db/judgekit.sqlite")
    ws.runs.to_frame()
    ws.crosstab(run="demo-single", row="cites_source", col="answers_question").to_frame()
    ws.phi(runs=["demo-single", "demo-split"], human=True).figure()
    ws.compare("demo-single", "demo-split").to_frame()
    ws.agreement("demo-split").to_frame()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import config, gates, reports, store


class Rows(list):
    """A listing (datasets, runs): a list of dicts with ``to_dict()`` and ``to_frame()``."""

    def to_dict(self) -> dict:
        return {"rows": reports.jsonable(list(self))}

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(list(self))


@dataclass(frozen=True)
class Workspace:
    """A judgekit database: its datasets, runs and every report over them."""

    url: str
    engine: Engine

    def _session(self) -> Session:
        return Session(self.engine)

    @property
    def datasets(self) -> Rows:
        """Datasets with their number of examples."""
        with self._session() as s:
            return Rows(store.list_datasets(s))

    @property
    def rubrics(self) -> Rows:
        with self._session() as s:
            return Rows(store.list_rubrics(s))

    @property
    def runs(self) -> Rows:
        """Runs with status, harness, judge and scored/total verdicts."""
        with self._session() as s:
            return Rows(reports.runs_report(s))

    def crosstab(self, run: str | int | None = None, row: str = "", col: str = "", *, human: bool = False,
                 annotator: str | None = None, dataset: str | None = None) -> reports.CrosstabReport:
        """Seed 003's 2×2 table of criteria ``row`` × ``col`` under a run (or ``human=True`` / ``annotator``)."""
        chosen = [n for n, on in (("run", run), ("human", human), ("annotator", annotator)) if on]
        if len(chosen) != 1:
            raise ValueError("choose exactly one source: run=NAME, human=True or annotator=NAME")
        with self._session() as s:
            src = reports.load_sources(s, [run] if run else [], human=human,
                                       annotators=[annotator] if annotator else [], dataset=dataset)[0]
            return reports.crosstab_report(src, row, col)

    def phi(self, runs: Sequence[str | int] = (), human: bool | str = False, *, annotators: Sequence[str] = (),
            dataset: str | None = None, n_boot: int = 1000, seed: int = 0) -> reports.PhiReport:
        """Phi matrices with bootstrap CIs of each run beside the human column, and the association audit.
        ``human=True`` is the consensus; a string names one annotator as the human column."""
        extra = [human] if isinstance(human, str) else []
        with self._session() as s:
            sources = reports.load_sources(s, [str(r) for r in runs], human=human is True,
                                           annotators=[*extra, *annotators], dataset=dataset)
            return reports.phi_report(sources, n_boot=n_boot, seed=seed)

    def compare(self, a: str | int, b: str | int) -> reports.CompareReport:
        """Flips per criterion (McNemar), failure attribution, all-pass rate and cost of two runs."""
        with self._session() as s:
            return reports.compare_runs(s, a, b)

    def agreement(self, run: str | int, *, annotator: str | None = None,
                  vs_run: str | int | None = None) -> reports.AgreementReport:
        """κ, accuracy, TPR/TNR, AUC per criterion against the human consensus (default), one annotator,
        or another run."""
        with self._session() as s:
            return reports.agreement_for(s, run, annotator=annotator, vs_run=vs_run)

    def check(self, run: str | int, *, annotator: str | None = None, gates_file: str | None = None,
              **thresholds: Any) -> gates.CheckReport:
        """``judgekit check``: ``min_kappa``, ``max_induced``, ``max_flip_rate`` (+ ``baseline``),
        ``kappa_bound``; ``.ok`` says whether every gate holds."""
        base = gates.load_gates(gates_file) if gates_file else gates.Gates()
        with self._session() as s:
            return gates.check(s, run, base.with_overrides(**thresholds), annotator=annotator)


def open_workspace(url: str | None = None) -> Workspace:
    """The workspace at ``url`` (default ``$JUDGEKIT_DB_URL``, else ``sqlite:///db/judgekit.sqlite``),
    migrated on first use."""
    resolved = config.db_url(url)
    return Workspace(resolved, store.engine_for(resolved))
