"""Hand-labeling: label sets (seeded samples), blind per-item labeling, annotator reliability, adjudication,
and the human consensus that forms the human column.

Where this sits in the flow: runs and labels live in :mod:`judgekit.store`; this module draws *label sets*
(a named, seeded sample of a dataset's examples, chosen at random, from a cross-tab cell of a run, or where
two runs disagree), serves the Label page and ``judgekit label-set`` one item at a time, writes each saved
item with :func:`store.upsert_labels` (the unique example × criterion × annotator key makes concurrent
annotators and edits safe), and turns every annotator's labels into the human column
(:func:`human_consensus`) and into reliability numbers (:func:`inter_annotator`) with :mod:`judgekit.stats`.

Conventions as in :mod:`judgekit.stats`: 1.0 = pass, 0.0 = fail, NaN = unsure / unlabelled / unresolved.
Scale labels (1–5) enter binary views through the criterion's ``pass_at``. Every function takes a
``Session``; the caller owns the transaction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, get_args

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from judgekit import stats, store
from judgekit.annotators import REFERENCE_ANNOTATOR, ROLES, CriterionReliability, Role, reliability, settle, thresholds
from judgekit.rubric import Criterion, value_text

__all__ = [
    "ROLES",
    "STRATEGIES",
    "Consensus",
    "CriterionReliability",
    "Disagreement",
    "ExampleText",
    "LabelSetInfo",
    "Progress",
    "Sample",
    "SampleSpec",
    "SetStatus",
    "adjudicate",
    "annotator_role",
    "clear_label",
    "create_label_set",
    "disagreements",
    "draw_sample",
    "example_text",
    "first_open",
    "get_label_set",
    "human_consensus",
    "set_status",
    "inter_annotator",
    "label_set_items",
    "list_label_sets",
    "own_labels",
    "parse_cell",
    "progress",
    "run_criteria",
    "run_verdicts",
    "save_item",
    "set_role",
]

StrategyKind = Literal["random", "cell", "disagree", "decide"]
STRATEGIES: tuple[StrategyKind, ...] = get_args(StrategyKind)
Outcome = Literal["pass", "fail"]
OUTCOMES: tuple[Outcome, Outcome] = ("pass", "fail")
CELLS: tuple[str, ...] = tuple(f"{r}/{c}" for r in OUTCOMES for c in OUTCOMES)
MAX_NAME = 200


# --------------------------------------------------------------------------------------------- strategies


@dataclass(frozen=True)
class SampleSpec:
    """How a label set is drawn.

    * ``random``: ``size`` examples of the dataset, uniformly without replacement.
    * ``cell``: examples from the cross-tab of criteria ``row`` × ``col`` under ``run`` (binary view, rows
      where both are scored). ``cell="fail/pass"`` draws only from that cell (row outcome / column outcome);
      ``cell=None`` draws equal numbers from each of the four cells (a short cell gives its share to the
      others).
    * ``disagree``: examples where ``run_a`` and ``run_b`` disagree on ``criterion``. ``cell="fail/pass"``
      = run A fails and run B passes (seed 003's rescued cases), ``"pass/fail"`` the reverse, ``None`` both.
    * ``decide``: the answers whose labels would decide the association audit's *undecided* pairs. The
      audit of ``runs`` (default: every run of the dataset) against the current human column says, per
      undecided pair, about how many more labels it needs and from which of the reference harness's cells
      (:func:`judgekit.audit.association_verdict`, rule 6); the budget ``size`` is split over those pairs
      in proportion and drawn at random within each cell from answers nobody has labelled
      (:func:`judgekit.audit.label_plan`, :func:`judgekit.audit.pick_answers`). Without any label yet it
      draws at random (the first labels calibrate everything else).

    The same spec and seed always draw the same examples in the same order. A pool smaller than ``size``
    is taken whole.
    """

    strategy: StrategyKind
    size: int
    seed: int = 0
    run: str | None = None
    row: str | None = None
    col: str | None = None
    cell: str | None = None
    run_a: str | None = None
    run_b: str | None = None
    criterion: str | None = None
    runs: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.strategy == "cell":
            where = self.cell or "all four cells, equal numbers"
            return f"cell of {self.row} × {self.col} under run {self.run}: {where}"
        if self.strategy == "disagree":
            how = {"fail/pass": "A fails, B passes", "pass/fail": "A passes, B fails"}.get(self.cell or "",
                                                                                         "either way")
            return f"{self.criterion}: run A {self.run_a} vs run B {self.run_b} disagree ({how})"
        if self.strategy == "decide":
            runs = ", ".join(self.runs) if self.runs else "every run"
            return f"decide the audit's undecided pairs ({runs} vs the human column)"
        return "random"


_OPTIONS = {
    "random": (),
    "cell": ("run", "row", "col", "cell"),
    "disagree": ("run_a", "run_b", "criterion", "cell"),
    "decide": ("runs",),
}
_REQUIRED = {"random": (), "cell": ("run", "row", "col"), "disagree": ("run_a", "run_b", "criterion"),
             "decide": ()}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def validate_spec(spec: SampleSpec) -> None:
    """Raise ValueError (one line, naming the option) for a spec that cannot be drawn as stated."""
    if spec.strategy not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {spec.strategy!r}")
    if isinstance(spec.size, bool) or not isinstance(spec.size, int) or spec.size < 1:
        raise ValueError(f"--size must be a positive integer, not {spec.size!r}")
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int) or spec.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, not {spec.seed!r}")
    for opt in ("run", "row", "col", "cell", "run_a", "run_b", "criterion", "runs"):
        if getattr(spec, opt) not in (None, ()) and opt not in _OPTIONS[spec.strategy]:
            raise ValueError(f"{_flag('run' if opt == 'runs' else opt)} does not apply to --strategy {spec.strategy}")
    for opt in _REQUIRED[spec.strategy]:
        if not getattr(spec, opt):
            raise ValueError(f"--strategy {spec.strategy} needs {_flag(opt)}")
    if spec.cell is not None:
        parse_cell(spec.cell)
        if spec.strategy == "disagree" and spec.cell not in ("fail/pass", "pass/fail"):
            raise ValueError(f"--cell for --strategy disagree must be fail/pass or pass/fail, "
                             f"not {spec.cell!r}")
    if spec.strategy == "cell" and spec.row == spec.col:
        raise ValueError(f"--row and --col name the same criterion {spec.row!r}")
    if spec.strategy == "disagree" and spec.run_a == spec.run_b:
        raise ValueError(f"--run-a and --run-b name the same run {spec.run_a!r}")


def parse_cell(text: str) -> tuple[Outcome, Outcome]:
    """``"fail/pass"`` → ``("fail", "pass")``: row (or run A) outcome / column (or run B) outcome."""
    parts = [p.strip().lower() for p in str(text).split("/")]
    if len(parts) != 2 or any(p not in OUTCOMES for p in parts):
        raise ValueError(f"--cell must be ROW/COL outcomes such as fail/pass (one of {', '.join(CELLS)}), "
                         f"not {text!r}")
    return parts[0], parts[1]  # type: ignore[return-value]


@dataclass(frozen=True)
class Sample:
    """A drawn sample: internal example ids in labeling order, the pool size, and how many per stratum."""

    example_ids: tuple[int, ...]
    pool: int
    strata: dict[str, int] = field(default_factory=dict)


def _run_source(s: Session, ref: str, dataset_id: int, flag: str):
    from judgekit import reports  # reports imports nothing from here; deferred to keep imports light

    run = store.get_run(s, ref)
    if run.dataset_id != dataset_id:
        ds = s.get(store.Dataset, run.dataset_id)
        raise ValueError(f"{flag} {ref}: the run judged dataset {ds.name if ds else run.dataset_id!r}, "
                         "not the label set's dataset")
    return reports.load_run(s, run)


def _column(src, key: str, flag: str) -> NDArray[np.float64]:
    if key not in src.keys:
        raise ValueError(f"{flag} {key}: not a criterion of {src.key} (criteria: {', '.join(src.keys)})")
    return src.binary[:, src.keys.index(key)]


def draw_sample(s: Session, dataset_id: int, spec: SampleSpec, keys: Sequence[str] | None = None) -> Sample:
    """Draw the examples of a label set (see :class:`SampleSpec`); raises ValueError / NotFound.

    ``keys`` (the label set's rubric criteria) limits ``decide`` to pairs annotators will label."""
    validate_spec(spec)
    rng = np.random.default_rng(spec.seed)
    if spec.strategy == "decide":
        return _decide_sample(s, dataset_id, spec, keys, rng)
    if spec.strategy == "random":
        pool = np.array(sorted(store.example_ids(s, dataset_id).values()), dtype=np.int64)
        if pool.size == 0:
            raise ValueError("the dataset has no examples")
        chosen = rng.choice(pool, size=min(spec.size, pool.size), replace=False)
        return Sample(tuple(int(x) for x in chosen), int(pool.size), {"random": int(chosen.size)})
    if spec.strategy == "cell":
        src = _run_source(s, spec.run, dataset_id, "--run")
        table = stats.crosstab(_column(src, spec.row, "--row"), _column(src, spec.col, "--col"))
        wanted = ["/".join(parse_cell(spec.cell))] if spec.cell else list(CELLS)
        pools = {c: src.index.ids[table.cell(*c.split("/"))] for c in wanted}
        total = sum(p.size for p in pools.values())
        if total == 0:
            raise ValueError(f"no example of run {spec.run} lies in cell {spec.cell or 'any'} of "
                             f"{spec.row} × {spec.col}")
        # Round-robin over the shuffled cells: equal numbers per cell, a short cell's share spills over.
        shuffled = {c: rng.permutation(p) for c, p in pools.items()}
        picked: list[tuple[str, int]] = []
        for k in range(max(p.size for p in shuffled.values())):
            picked += [(c, int(p[k])) for c, p in shuffled.items() if k < p.size]
        picked = picked[: spec.size]
        strata = {c: sum(1 for cc, _ in picked if cc == c) for c in wanted}
        order = rng.permutation(len(picked))  # labeling order must not reveal the cell
        return Sample(tuple(picked[i][1] for i in order), int(total), strata)
    a = _run_source(s, spec.run_a, dataset_id, "--run-a")
    b = _run_source(s, spec.run_b, dataset_id, "--run-b")
    va, vb = _column(a, spec.criterion, "--criterion"), _column(b, spec.criterion, "--criterion")
    flips = {"fail/pass": (va == 0.0) & (vb == 1.0), "pass/fail": (va == 1.0) & (vb == 0.0)}
    wanted = [spec.cell] if spec.cell else list(flips)
    mask = np.zeros(va.shape, dtype=bool)
    for c in wanted:
        mask |= flips[c]
    pool = a.index.ids[mask]
    if pool.size == 0:
        raise ValueError(f"runs {spec.run_a} and {spec.run_b} do not disagree on {spec.criterion} "
                         f"({spec.cell or 'either way'})")
    chosen = rng.choice(pool, size=min(spec.size, pool.size), replace=False)
    rows = a.index.rows_of(chosen)
    strata = {c: int(flips[c][rows].sum()) for c in wanted}
    return Sample(tuple(int(x) for x in chosen), int(pool.size), strata)


def _decide_sample(
    s: Session, dataset_id: int, spec: SampleSpec, keys: Sequence[str] | None, rng: np.random.Generator
) -> Sample:
    """The ``decide`` strategy (see :class:`SampleSpec`)."""
    from judgekit import audit, noise, reports

    ds = s.get(store.Dataset, dataset_id)
    runs = list(spec.runs) or runs_for_dataset(s, dataset_id)
    if not runs:
        raise ValueError(f"--strategy decide needs a run of dataset {ds.name!r}: the audit compares harnesses")
    for r in runs:
        _run_source(s, r, dataset_id, "--run")  # same dataset, clear message otherwise
    has_labels = bool([a for a in store.annotators_for_dataset(s, dataset_id) if a != REFERENCE_ANNOTATOR])
    sources = reports.load_sources(s, runs, human=has_labels, dataset=ds.name)
    if keys is not None:
        wanted = [k for k in sources[0].keys if k in set(keys)]
        if len(wanted) < 2:
            raise ValueError("--strategy decide needs two criteria that both the runs and the rubric have")
        sources = [src.select(wanted) for src in sources]
    ref = reports.reference_run(sources)
    human = next((src for src in sources if src.kind == "human"), None)
    available = ref.covered & ~(human.covered if human is not None else np.zeros(len(ref.index), bool))
    if not available.any():
        raise ValueError(f"every answer {ref.key} judged is labelled already: nothing left for --strategy decide")
    if human is None:
        pool = np.flatnonzero(available)
        chosen = rng.choice(pool, size=min(spec.size, pool.size), replace=False)
        return Sample(tuple(int(x) for x in ref.index.ids[chosen]), int(pool.size), {"random (no labels yet)":
                                                                                     int(chosen.size)})
    rep = reports.phi_report(sources, noise_floor=noise.find_floor(s, sources))  # the audit phi and Associations show
    verdicts = [audit.AuditVerdict(a.verdict, a.induced_by, a.note, a.distorted_by, a.label_more) for a in rep.audit]
    plan = audit.label_plan(verdicts, [a.evidence for a in rep.audit])
    if not plan:
        raise ValueError("the audit has no undecided pair to decide: every pair is real, induced, distorted or none")
    rows = audit.pick_answers(plan, ref.select(rep.criteria).binary, available, spec.size, rng)
    strata = {f"{rep.audit[item.pair].a} × {rep.audit[item.pair].b}": item.k for item in plan}
    return Sample(tuple(int(x) for x in ref.index.ids[rows]), int(available.sum()), strata)


# --------------------------------------------------------------------------------------------- label sets


@dataclass(frozen=True)
class LabelSetInfo:
    """A label set with its dataset, rubric criteria and the strategy it was drawn with."""

    id: int
    name: str
    dataset_id: int
    dataset: str
    rubric_id: int
    rubric: str
    criteria: tuple[Criterion, ...]
    strategy: dict[str, Any]
    size: int


def create_label_set(s: Session, name: str, *, dataset: str, rubric: str, spec: SampleSpec) -> LabelSetInfo:
    """Draw a sample and store it as a label set; raises ValueError / NotFound before writing anything."""
    name = (name or "").strip()
    if not name:
        raise ValueError("a label set needs a name")
    if len(name) > MAX_NAME:
        raise ValueError(f"label set name is {len(name)} characters; the limit is {MAX_NAME}")
    validate_spec(spec)
    ds = store.get_dataset(s, dataset)
    rubric_row = store.get_rubric_row(s, rubric)
    store.check_new_name(s, store.LabelSet, "label set", name)
    sample = draw_sample(s, ds.id, spec, [c.key for c in store.rubric_value(s, rubric_row).criteria])
    strategy = {
        "kind": spec.strategy,
        "size": spec.size,
        "seed": spec.seed,
        **{k: (list(v) if isinstance(v, tuple) else v) for k in _OPTIONS[spec.strategy]
           if (v := getattr(spec, k)) not in (None, ())},
        "pool": sample.pool,
        "strata": sample.strata,
        "description": spec.describe(),
    }
    row = store.LabelSet(name=name, dataset_id=ds.id, rubric_id=rubric_row.id, strategy=strategy)
    s.add(row)
    s.flush()
    s.execute(
        insert(store.LabelSetItem),
        [{"label_set_id": row.id, "example_id": e, "position": i} for i, e in enumerate(sample.example_ids)],
    )
    return get_label_set(s, row.id)


def get_label_set(s: Session, ref: str | int) -> LabelSetInfo:
    """A label set by name (or numeric id)."""
    row = s.scalar(select(store.LabelSet).where(store.LabelSet.name == str(ref)))
    if row is None and str(ref).isdigit():
        row = s.get(store.LabelSet, int(ref))
    if row is None:
        raise store.NotFound(f"no label set named {ref!r} (see `judgekit label-set list`)")
    ds = s.get(store.Dataset, row.dataset_id)
    rubric_row = s.get(store.RubricRow, row.rubric_id)
    size = s.scalar(select(func.count()).where(store.LabelSetItem.label_set_id == row.id)) or 0
    return LabelSetInfo(
        id=row.id, name=row.name, dataset_id=row.dataset_id, dataset=ds.name, rubric_id=row.rubric_id,
        rubric=rubric_row.name, criteria=store.rubric_value(s, rubric_row).criteria,
        strategy=dict(row.strategy or {}), size=int(size),
    )


def label_set_items(s: Session, set_id: int) -> list[int]:
    """Internal example ids of a label set, in labeling order."""
    return list(s.scalars(select(store.LabelSetItem.example_id)
                          .where(store.LabelSetItem.label_set_id == set_id)
                          .order_by(store.LabelSetItem.position)))


def _labelled_items(s: Session, set_id: int) -> dict[str, set[int]]:
    """Annotator name → the set's example ids that annotator has at least one label on."""
    q = (
        select(store.Annotator.name, store.Label.example_id)
        .join(store.Label, store.Label.annotator_id == store.Annotator.id)
        .join(store.LabelSetItem, store.LabelSetItem.example_id == store.Label.example_id)
        .where(store.LabelSetItem.label_set_id == set_id)
        .distinct()
    )
    out: dict[str, set[int]] = {}
    for name, ex in s.execute(q):
        out.setdefault(name, set()).add(ex)
    return out


def list_label_sets(s: Session) -> list[dict]:
    """Every label set with its size and how many items each annotator (not ``reference``) has labelled."""
    out = []
    for row in s.scalars(select(store.LabelSet).order_by(store.LabelSet.id)):
        info = get_label_set(s, row.id)
        labelled = sorted(_labelled_items(s, row.id).items())
        done = {a: len(ex) for a, ex in labelled if a != REFERENCE_ANNOTATOR}
        out.append({
            "id": info.id, "name": info.name, "dataset": info.dataset, "rubric": info.rubric,
            "strategy": info.strategy.get("kind"), "description": info.strategy.get("description", ""),
            "seed": info.strategy.get("seed"), "size": info.size, "labelled": done,
            "created_at": row.created_at,
        })
    return out


class SetStatus(NamedTuple):
    """Where a label set stands as a whole — counts only, never whose label is what on which item.

    ``labelled``: annotator → items with at least one of their labels (``reference`` left out);
    ``settled``: items whose human consensus (:func:`human_consensus`'s rules) has a value on every criterion;
    ``split``: items where the consensus is unresolved on some criterion although two or more annotators
    labelled it (a tie, or adjudicators who disagree); ``open``: items without any sure label."""

    size: int
    labelled: dict[str, int]
    settled: int
    split: int
    open: int


def set_status(s: Session, info: LabelSetInfo) -> SetStatus:
    """Progress and consensus of a label set over all its annotators (see :class:`SetStatus`)."""
    items = label_set_items(s, info.id)
    lab = _labels(s, info.dataset_id, info.criteria, (REFERENCE_ANNOTATOR,), items)
    done = {a: len(ex) for a, ex in sorted(_labelled_items(s, info.id).items()) if a != REFERENCE_ANNOTATOR}
    if not len(lab.names) or not items:
        return SetStatus(len(items), done, 0, 0, len(items))
    consensus = settle(lab.raw, lab.roles, info.criteria)  # (items, criteria), NaN = unresolved
    labels = (~np.isnan(lab.raw)).sum(axis=0)  # (items, criteria): sure labels per cell
    settled = ~np.isnan(consensus).any(axis=1)
    split = (np.isnan(consensus) & (labels >= 2)).any(axis=1)
    untouched = (labels == 0).all(axis=1)
    return SetStatus(len(items), done, int(settled.sum()), int(split.sum()), int(untouched.sum()))


# --------------------------------------------------------------------------------------------- labeling


class Progress(NamedTuple):
    """An annotator's progress through a label set: ``labelled`` of ``total`` items; ``first_open`` is the
    position of the first item without any of this annotator's labels (None when every item has some)."""

    total: int
    labelled: int
    first_open: int | None


def progress(s: Session, set_id: int, annotator: str) -> Progress:
    items = label_set_items(s, set_id)
    mine = _labelled_items(s, set_id).get(annotator, set())
    open_ = next((i for i, e in enumerate(items) if e not in mine), None)
    return Progress(len(items), sum(1 for e in items if e in mine), open_)


def first_open(s: Session, set_id: int, annotator: str) -> int | None:
    """Where an annotator resumes: the first item without their labels (None: all labelled)."""
    return progress(s, set_id, annotator).first_open


@dataclass(frozen=True)
class ExampleText:
    """What an annotator sees of an example — never its metadata (the demo's holds planted properties)."""

    id: int
    ext_id: str
    question: str
    context: str
    answer: str


def example_text(s: Session, example_id: int) -> ExampleText:
    ex = s.get(store.Example, example_id)
    if ex is None:
        raise store.NotFound(f"no example with internal id {example_id}")
    return ExampleText(ex.id, ex.ext_id, ex.question or "", ex.context or "", ex.answer)


def own_labels(s: Session, example_id: int, annotator: str) -> tuple[dict[str, int | None], str | None]:
    """One annotator's labels on one example (criterion key → value, None = unsure) and their note.

    Only this annotator's rows are read: the Label page is blind to every other label.
    """
    rows = s.execute(
        select(store.Label.criterion, store.Label.value, store.Label.note)
        .join(store.Annotator, store.Annotator.id == store.Label.annotator_id)
        .where(store.Label.example_id == example_id, store.Annotator.name == annotator)
    ).all()
    note = next((n for _, _, n in rows if n), None)
    return {c: v for c, v, _ in rows}, note


def _check_value(c: Criterion, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or int(value) != value or int(value) not in c.valid_values():
        raise ValueError(f"{value!r} is not a valid label for {c.kind} criterion {c.key!r}")
    return int(value)


def save_item(
    s: Session,
    example_id: int,
    annotator: str,
    values: Mapping[str, int | None],
    criteria: Sequence[Criterion],
    note: str | None = None,
) -> int:
    """Upsert one annotator's labels for one example (one row per criterion in ``values``; None = unsure).

    The note, if any, is stored on every row of the item. Returns the number of rows written. A key the
    rubrics define differently (:func:`store.label_key_conflicts`) is refused, as file imports refuse it.
    """
    annotator = (annotator or "").strip()
    if not annotator:
        raise ValueError("labels need an annotator name")
    by_key = {c.key: c for c in criteria}
    unknown = [k for k in values if k not in by_key]
    if unknown:
        raise ValueError(f"unknown criterion {unknown[0]!r}")
    conflicts = store.label_key_conflicts(s)
    refused = [k for k in values if k in conflicts]
    if refused:
        raise ValueError(f"{conflicts[refused[0]]}; nothing was saved")
    note = (note or "").strip() or None
    rows = [{"example_id": example_id, "criterion": k, "annotator": annotator,
             "value": _check_value(by_key[k], v), "note": note} for k, v in values.items()]
    return store.upsert_labels(s, rows)


def clear_label(s: Session, example_id: int, criterion: str, annotator: str) -> int:
    """Delete one label (e.g. an adjudication taken back); returns rows deleted."""
    aid = s.scalar(select(store.Annotator.id).where(store.Annotator.name == annotator))
    if aid is None:
        return 0
    res = s.execute(delete(store.Label).where(store.Label.example_id == example_id,
                                              store.Label.criterion == criterion,
                                              store.Label.annotator_id == aid))
    return res.rowcount or 0


# --------------------------------------------------------------------------------------------- roles


def set_role(s: Session, name: str, role: Role) -> None:
    """Make ``name`` an annotator or an adjudicator (created if new). An adjudicator's labels settle the
    consensus wherever they are present."""
    name = (name or "").strip()
    if not name:
        raise ValueError("an annotator needs a name")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    aid = store.annotator_id(s, name)
    s.execute(update(store.Annotator).where(store.Annotator.id == aid).values(role=role))


def annotator_role(s: Session, name: str) -> Role | None:
    """The annotator's role, or None if no annotator has that name yet."""
    return s.scalar(select(store.Annotator.role).where(store.Annotator.name == (name or "").strip()))


def adjudicate(
    s: Session, example_id: int, criterion: Criterion, adjudicator: str, value: int | None
) -> None:
    """Settle one cell: the adjudicator's label (``None`` clears it)."""
    if annotator_role(s, adjudicator) != "adjudicator":
        raise ValueError(f"{adjudicator!r} is not an adjudicator (tick 'I adjudicate' first)")
    if value is None:
        clear_label(s, example_id, criterion.key, adjudicator)
    else:
        save_item(s, example_id, adjudicator, {criterion.key: value}, [criterion], note="adjudicated")


# --------------------------------------------------------------------------------------------- reveal


def run_criteria(s: Session, run_ref: str | int) -> list[str]:
    """Criterion keys of a run's rubric (for choosing cross-tab / disagreement criteria)."""
    run = store.get_run(s, run_ref)
    return [c.key for c in store.criterion_rows(s, run.rubric_id)]


def runs_for_dataset(s: Session, dataset_id: int) -> list[str]:
    """Names of the runs that judged a dataset, oldest first."""
    q = select(store.Run.name).where(store.Run.dataset_id == dataset_id).order_by(store.Run.id)
    return list(s.scalars(q))


def run_verdicts(s: Session, example_id: int) -> list[dict]:
    """How every run judged one example (run, judge, criterion, verdict, rationale): the post-save reveal."""
    q = (
        select(store.Run.name, store.Judge, store.CriterionRow.key, store.CriterionRow.kind,
               store.Verdict.value, store.Verdict.rationale)
        .join(store.Run, store.Run.id == store.Verdict.run_id)
        .join(store.Judge, store.Judge.id == store.Run.judge_id)
        .join(store.CriterionRow, store.CriterionRow.id == store.Verdict.criterion_id)
        .where(store.Verdict.example_id == example_id)
        .order_by(store.Run.id, store.CriterionRow.position)
    )
    return [
        {"run": run, "judge": store.judge_label(judge), "criterion": key, "verdict": value_text(value, kind),
         "rationale": rationale or ""}
        for run, judge, key, kind, value, rationale in s.execute(q)
    ]


# --------------------------------------------------------------------------------------------- consensus


@dataclass(frozen=True, eq=False)
class _Labels:
    """Labels as ``(n_annotators, n_examples, n_criteria)`` raw values, split by role."""

    example_ids: NDArray[np.int64]
    names: list[str]
    roles: list[str]
    raw: NDArray[np.float64]

    def of(self, role: str) -> tuple[list[str], NDArray[np.float64]]:
        keep = [i for i, r in enumerate(self.roles) if r == role]
        return [self.names[i] for i in keep], self.raw[keep]


def _labels(
    s: Session, dataset_id: int, criteria: Sequence[Criterion], exclude: Iterable[str],
    example_ids: Sequence[int] | None = None,
) -> _Labels:
    """The label tensor (through :func:`judgekit.reports.label_tensor`, numeric and fast), with roles."""
    from judgekit import reports

    index = reports.example_index(s, dataset_id)
    excluded = set(exclude)
    names = [a for a in store.annotators_for_dataset(s, dataset_id) if a not in excluded]
    names, _, raw, _ = reports.label_tensor(s, index, criteria, names)
    ids = index.ids
    if example_ids is not None:
        ids = np.array(sorted(set(example_ids)), dtype=np.int64)
        raw = raw[:, index.rows_of(ids), :]
    return _Labels(ids, names, store.annotator_roles(s, names), raw)


class Consensus(NamedTuple):
    """The human column: ``matrix[i, j]`` is the consensus on criterion j for ``example_ids[i]``.

    1.0 pass, 0.0 fail, NaN unresolved (nobody labelled it, only "unsure", or a tie). Rows are every
    example of the dataset sorted by internal id — the order :func:`judgekit.reports.example_index` uses.
    """

    example_ids: NDArray[np.int64]
    matrix: NDArray[np.float64]


def human_consensus(
    s: Session,
    dataset_id: int,
    criteria: Sequence[Criterion],
    exclude: Iterable[str] = (REFERENCE_ANNOTATOR,),
) -> Consensus:
    """The human column of a dataset (binary view), settled by adjudicators.

    Per cell: where an adjudicator has a (sure) label, the adjudicators' majority wins (two adjudicators
    who disagree leave the cell unresolved); elsewhere the majority of the annotators' binary views
    (:func:`stats.consensus`: a tie is NaN, never a silent pass or fail). "Unsure" labels do not vote.
    Annotators named in ``exclude`` (by default the demo's ``reference`` truth) are left out entirely.
    """
    lab = _labels(s, dataset_id, criteria, exclude)
    return Consensus(lab.example_ids, settle(lab.raw, lab.roles, criteria))


def inter_annotator(
    s: Session, dataset_id: int, criteria: Sequence[Criterion], *, example_ids: Sequence[int] | None = None,
    exclude: Iterable[str] = (REFERENCE_ANNOTATOR,),
) -> list[CriterionReliability]:
    """κ and α per criterion among the annotators (:func:`judgekit.annotators.reliability`: adjudicators
    settle, they are not raters) over the examples at least two annotators labelled — within
    ``example_ids`` (a label set's items) when given."""
    lab = _labels(s, dataset_id, criteria, exclude, example_ids)
    return reliability(lab.raw, lab.names, lab.roles, criteria).criteria


@dataclass(frozen=True)
class Disagreement:
    """One example × criterion where annotators' binary views differ (or adjudicators settled it).

    ``votes``: annotator → stored value (1/0 or 1–5; unsure omitted). ``majority``: the annotators'
    consensus (NaN = tie); ``adjudicated``: the adjudicators' settlement (None if not settled);
    ``consensus``: what :func:`human_consensus` uses.
    """

    example_id: int
    ext_id: str
    criterion: str
    votes: dict[str, int]
    majority: float
    adjudicated: float | None
    consensus: float

    @property
    def resolved(self) -> bool:
        return not math.isnan(self.consensus)


def disagreements(
    s: Session, dataset_id: int, criteria: Sequence[Criterion], *, example_ids: Sequence[int] | None = None,
    exclude: Iterable[str] = (REFERENCE_ANNOTATOR,),
) -> list[Disagreement]:
    """Cells where annotators disagree (a pass and a fail among their binary views), for adjudication."""
    lab = _labels(s, dataset_id, criteria, exclude, example_ids)
    names, L = lab.of("annotator")
    _, adj = lab.of("adjudicator")
    if not names:
        return []
    cut = thresholds(criteria)
    B = stats.binarize(L, cut)
    split = (B == 1.0).any(axis=0) & (B == 0.0).any(axis=0)
    majority = stats.consensus(B)
    settled = ~np.isnan(adj).all(axis=0) if len(adj) else np.zeros(split.shape, bool)
    adj_value = stats.consensus(stats.binarize(adj, cut)) if len(adj) else np.full(split.shape, np.nan)
    involved = [int(x) for x in lab.example_ids[split.any(axis=1)]]
    ext = dict(s.execute(select(store.Example.id, store.Example.ext_id)
                         .where(store.Example.id.in_(involved))).all())
    out = []
    for i, j in zip(*np.nonzero(split), strict=True):
        ex = int(lab.example_ids[i])
        votes = {names[a]: int(L[a, i, j]) for a in range(len(names)) if not np.isnan(L[a, i, j])}
        adjudicated = float(adj_value[i, j]) if settled[i, j] else None
        out.append(Disagreement(ex, ext.get(ex, str(ex)), criteria[j].key, votes, float(majority[i, j]),
                                adjudicated, float(adj_value[i, j] if settled[i, j] else majority[i, j])))
    return out
