"""The Python API for notebooks: ``judgekit.open(url)`` → a :class:`Workspace`.

Each method opens one short session, calls the same report functions as ``judgekit report …`` and the
dashboard (:mod:`judgekit.reports`, :mod:`judgekit.gates`), and returns the report object itself -- as the
subclass defined here that adds the notebook conveniences -- with ``.to_dict()`` (the CLI's
``--format json``), ``.to_frame()`` (pandas) and ``.figure()`` (plotly, drawn by :mod:`judgekit.figures`
like the pages; the report layer itself never draws)::

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
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import config, gates, matrix_cache, reports, sources, store

# a finished run or an import fills the matrix cache through the source loaders (see matrix_cache.written)
matrix_cache.warm_after_writes(sources.warm_cache)


R = TypeVar("R")


def _viewable(cls: type[R], report: Any) -> R:
    """``report`` as its notebook subclass ``cls``: the same fields, plus ``to_frame()`` and ``figure()``."""
    return cls(**{f.name: getattr(report, f.name) for f in fields(report)})


@dataclass(frozen=True, eq=False)
class CrosstabReport(reports.CrosstabReport):
    def to_frame(self):
        """The 2×2 table as a pandas frame (counts, row totals, column failure rate per row)."""
        from judgekit import figures

        return figures.crosstab_table(self, formatted=False)

    def figure(self):
        """The 2×2 counts as a plotly heatmap."""
        from judgekit import figures

        return figures.crosstab_figure(self)


@dataclass(frozen=True, eq=False)
class PhiReport(reports.PhiReport):
    def to_frame(self):
        """One row per source and criterion pair: phi, CI, n and the audit's verdict (pandas)."""
        from judgekit import figures

        return figures.phi_frame(self)

    def figure(self, source: str | None = None):
        """The phi heatmap of ``source``, or of every source side by side (plotly)."""
        from judgekit import figures

        return figures.phi_figure(self, source)


@dataclass(frozen=True, eq=False)
class CompareReport(reports.CompareReport):
    def to_frame(self):
        """Flips per criterion with the exact McNemar p (pandas)."""
        from judgekit import figures

        return figures.flips_frame(self, formatted=False)

    def figure(self):
        """Failures attributed to each criterion under A and B (plotly)."""
        from judgekit import figures

        return figures.attribution_figure(self, (self.a, self.b))


@dataclass(frozen=True, eq=False)
class AgreementReport(reports.AgreementReport):
    def to_frame(self):
        """Per criterion: n, accuracy, κ and its CI, TPR/TNR, prevalence, AUC (pandas; NaN = undefined)."""
        from judgekit import figures

        return figures.agreement_frame(self, formatted=False)

    def figure(self):
        """κ per criterion with its 95% CI (plotly)."""
        from judgekit import figures

        return figures.kappa_figure(self, f"{self.source} vs {self.human}: Cohen's κ")


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
                 annotator: str | None = None, dataset: str | None = None) -> CrosstabReport:
        """Seed 003's 2×2 table of criteria ``row`` × ``col`` under a run (or ``human=True`` / ``annotator``)."""
        chosen = [n for n, on in (("run", run), ("human", human), ("annotator", annotator)) if on]
        if len(chosen) != 1:
            raise ValueError("choose exactly one source: run=NAME, human=True or annotator=NAME")
        if not row or not col:
            raise ValueError("name the two criteria: row=KEY and col=KEY")
        with self._session() as s:
            src = sources.load_sources(s, [run] if run else [], human=human,
                                       annotators=[annotator] if annotator else [], dataset=dataset)[0]
            return _viewable(CrosstabReport, reports.crosstab_report(src, row, col))

    def phi(self, runs: Sequence[str | int] = (), human: bool | str = False, *, annotators: Sequence[str] = (),
            dataset: str | None = None, n_boot: int = 1000, seed: int = 0) -> PhiReport:
        """Phi matrices with bootstrap CIs of each run beside the human column, and the association audit.
        ``human=True`` is the consensus; a string names one annotator as the human column."""
        extra = [human] if isinstance(human, str) else []
        runs = [runs] if isinstance(runs, str | int) else runs  # one run named on its own
        from judgekit import noise

        with self._session() as s:
            loaded = sources.load_sources(s, [str(r) for r in runs], human=human is True,
                                          annotators=[*extra, *annotators], dataset=dataset)
            return _viewable(PhiReport, reports.phi_report(loaded, n_boot=n_boot, seed=seed,
                                                           noise_floor=noise.find_floor(s, loaded)))

    def compare(self, a: str | int, b: str | int) -> CompareReport:
        """Flips per criterion (McNemar), failure attribution, all-pass rate and cost of two runs."""
        with self._session() as s:
            return _viewable(CompareReport, reports.compare_runs(s, a, b))

    def noise_floor(self, a: str | int, b: str | int):
        """The judge's own flip rate (its repeat runs) beside the flips between runs ``a`` and ``b`` --
        what ``report compare`` and ``report agreement --vs-run`` print as ``noise_floor``."""
        from judgekit import noise

        with self._session() as s:
            return noise.flips_beside_floor(s, a, b)

    def agreement(self, run: str | int, *, annotator: str | None = None,
                  vs_run: str | int | None = None) -> AgreementReport:
        """κ, accuracy, TPR/TNR, AUC per criterion against the human consensus (default), one annotator,
        or another run."""
        with self._session() as s:
            return _viewable(AgreementReport, reports.agreement_for(s, run, annotator=annotator, vs_run=vs_run))

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
