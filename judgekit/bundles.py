"""Bundles: a dataset's answers grouped by metadata fields, and the bundle-level (holistic) run over them.

Seed 002's judge has two levels. Each answer is judged on its own (a per-answer run); then one
*holistic* call per bundle — the answers one model gave to one pack of prompts — scores the set on the
rubric's dimensions, from an evidence block built out of the per-answer verdicts (never answer text).
This module is that second level's data side:

* **Grouping** (:func:`ensure_bundles`): answers sharing their values of the ``--bundle-by`` fields
  (``model``; or ``model`` and ``pack`` — the seed's bundle) form a bundle. Values are compared as
  text (:func:`judgekit.datasets.bundle_value`); an answer without one of the fields is in no bundle.
  Bundles are stored once per (dataset, fields) — a dataset's answers never change after import.
* **K.O. rule per bundle**: the rubric's ``bundle_ko_rules`` entry for one of the bundle's values, else
  its rubric-wide ``ko_rule`` (:meth:`judgekit.rubric.Rubric.ko_rule_for`); fixed on the run when it
  is created (``run_bundles``), shown with every listing.
* **Evidence** (:func:`bundle_evidence`): per bundle, one line per answer with a scored verdict in the
  per-answer run (``--from-run``), in :func:`judgekit.holistic.evidence_line`'s format. For a
  several-criteria rubric the line's rationale is the first flagged criterion's (the rubric's K.O.
  criterion first), else the lowest-scored criterion's (scale scores on 0–1, ties in rubric order) —
  the verdict where the problem is.
* **Runs** (:func:`create_bundle_run`): an ordinary run — ``harness.level == "bundle"`` — whose calls
  the runner asks :func:`pending_calls` for (one per bundle under ``single``, one per dimension per
  bundle under ``split``), whose calls are stored with ``bundle_id`` and whose verdicts go to
  ``bundle_verdicts`` (run × bundle × criterion). Concurrency, persistence per call, resume and the
  crash guarantees are the runner's. A critique of such a run is bundle-level too
  (:func:`critique_pending_calls`).
* **Reading back** (:func:`load_bundle_verdicts`): a run's bundle verdicts aligned on its bundles, for
  :mod:`judgekit.bundle_report`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import holistic, prompts, store
from judgekit.datasets import bundle_value
from judgekit.harness import Harness, PlannedCall, criterion_groups
from judgekit.rawtext import one_line
from judgekit.rubric import Criterion, JudgedRun, KORule, Rubric

__all__ = [
    "CATEGORY_FIELD",
    "BundleVerdicts",
    "bundle_evidence",
    "create_bundle_run",
    "critique_pending_calls",
    "ensure_bundles",
    "evidence_rationale",
    "groupings",
    "is_bundle_run",
    "list_bundles",
    "load_bundle_verdicts",
    "member_flags",
    "pending_calls",
]

CATEGORY_FIELD = "category"
CHUNK = 64  # bundles whose evidence is read in one query
UNFINISHED_STATUSES = ("pending", "running", "interrupted")  # a from-run whose evidence is not final yet


def is_bundle_run(run: store.Run) -> bool:
    return store.run_level(run) == "bundle"


def _fields_key(fields: Sequence[str]) -> str:
    return json.dumps(list(fields), ensure_ascii=False)


def _key_hash(fields: Sequence[str], values: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps([list(fields), list(values)], ensure_ascii=False).encode()).hexdigest()


def _label(values: Sequence[str]) -> str:
    return " · ".join(one_line(v) for v in values)


def check_fields(fields: Sequence[str]) -> tuple[str, ...]:
    out = tuple(f.strip() for f in fields)
    if not out or any(not f for f in out):
        raise ValueError("--bundle-by needs a metadata field name (repeat it to group by several)")
    if len(set(out)) != len(out):
        raise ValueError(f"--bundle-by names a field twice ({', '.join(out)})")
    return out


# ------------------------------------------------------------------------------------------ grouping


def ensure_bundles(s: Session, dataset: str | store.Dataset, fields: Sequence[str]) -> list[store.Bundle]:
    """The bundles of a dataset by ``fields`` (stored on first use), sorted by their values.

    An answer lacking one of the fields (or holding null) belongs to no bundle; a dataset where no
    answer has them all is an error naming the fields.
    """
    ds = dataset if isinstance(dataset, store.Dataset) else store.get_dataset(s, dataset)
    fields = check_fields(fields)
    key = _fields_key(fields)
    have = list(s.scalars(select(store.Bundle).where(store.Bundle.dataset_id == ds.id, store.Bundle.fields == key)
                          .order_by(store.Bundle.id)))
    if have:
        return have
    members: dict[tuple[str, ...], list[int]] = {}
    for ex_id, meta in s.execute(select(store.Example.id, store.Example.meta)
                                 .where(store.Example.dataset_id == ds.id).order_by(store.Example.id)):
        values = tuple(bundle_value((meta or {}).get(f)) for f in fields)
        if None in values:  # a field missing or blank: the answer belongs to no bundle
            continue
        members.setdefault(values, []).append(ex_id)
    if not members:
        raise ValueError(f"no answer of dataset {ds.name!r} has metadata field{'s' if len(fields) > 1 else ''} "
                         f"{', '.join(repr(f) for f in fields)}: nothing to bundle")
    out = []
    now = store.utcnow()
    for values, ids in sorted(members.items()):
        row = store.Bundle(dataset_id=ds.id, fields=key, key_values=list(values), label=_label(values),
                           key_hash=_key_hash(fields, values), size=len(ids), created_at=now)
        s.add(row)
        out.append((row, ids))
    s.flush()
    rows = [{"bundle_id": b.id, "example_id": e, "position": i} for b, ids in out for i, e in enumerate(ids)]
    for i in range(0, len(rows), 5000):
        s.execute(insert(store.BundleExample), rows[i : i + 5000])
    return [b for b, _ in out]


def groupings(s: Session, dataset_id: int | None = None) -> list[dict]:
    """The stored groupings: dataset, fields, number of bundles and answers in them."""
    q = (select(store.Dataset.name, store.Bundle.fields, func.count(), func.sum(store.Bundle.size))
         .join(store.Dataset, store.Dataset.id == store.Bundle.dataset_id)
         .group_by(store.Dataset.name, store.Bundle.fields).order_by(store.Dataset.name, store.Bundle.fields))
    if dataset_id is not None:
        q = q.where(store.Bundle.dataset_id == dataset_id)
    return [{"dataset": d, "fields": json.loads(f), "bundles": int(n), "answers": int(a or 0)}
            for d, f, n, a in s.execute(q)]


def bundle_fields(b: store.Bundle) -> tuple[str, ...]:
    return tuple(json.loads(b.fields))


def ko_rule_of(rubric: Rubric, b: store.Bundle) -> KORule | None:
    """The K.O. rule a bundle is judged under (see :meth:`Rubric.ko_rule_for`)."""
    try:
        return rubric.ko_rule_for(dict(zip(bundle_fields(b), b.key_values, strict=True)))
    except ValueError as e:
        raise ValueError(f"bundle {b.label!r}: {e}") from None


def _scored_members(s: Session, run_id: int, bundle_ids: Sequence[int]) -> dict[int, int]:
    """Per bundle, its answers with at least one scored verdict in a per-answer run."""
    BE, V = store.BundleExample, store.Verdict
    q = (select(BE.bundle_id, func.count(func.distinct(V.example_id)))
         .join(V, V.example_id == BE.example_id)
         .where(V.run_id == run_id, V.value.is_not(None), BE.bundle_id.in_(list(bundle_ids)))
         .group_by(BE.bundle_id))
    return {b: int(n) for b, n in s.execute(q)}


def list_bundles(s: Session, dataset: str, fields: Sequence[str], *, rubric: str | None = None,
                 from_run: str | int | None = None, category_field: str = CATEGORY_FIELD) -> list[dict]:
    """The bundles of a dataset by ``fields`` (grouped and stored if new): values, size, categories, and
    with ``rubric`` the K.O. rule each is judged under, with ``from_run`` its answers that carry a
    scored per-answer verdict (the evidence lines a holistic call would get)."""
    ds = store.get_dataset(s, dataset)
    rows = ensure_bundles(s, ds, fields)
    rub = store.load_rubric(s, rubric) if rubric else None
    scored: dict[int, int] | None = None
    if from_run is not None:
        run = _per_answer_run(s, from_run, ds)
        scored = _scored_members(s, run.id, [b.id for b in rows])
    cats: dict[int, Counter] = {b.id: Counter() for b in rows}
    for bid, meta in s.execute(
        select(store.BundleExample.bundle_id, store.Example.meta)
        .join(store.Example, store.Example.id == store.BundleExample.example_id)
        .where(store.BundleExample.bundle_id.in_([b.id for b in rows]))
    ):
        cats[bid][one_line((meta or {}).get(category_field)) or holistic.NO_CATEGORY] += 1
    out = []
    for b in rows:
        item = {"id": b.id, "bundle": b.label, "fields": list(bundle_fields(b)), "values": list(b.key_values),
                "answers": b.size, "categories": dict(cats[b.id].most_common())}
        if rub is not None:
            rule = ko_rule_of(rub, b)
            item["ko_rule"] = None if rule is None else {"criterion": rule.criterion, "floor": rule.floor}
        if scored is not None:
            item["evidence_lines"] = scored.get(b.id, 0)
        out.append(item)
    return out


def render_bundles_table(rows: Sequence[dict]) -> str:
    if not rows:
        return "no bundles"
    has_ko, has_ev = "ko_rule" in rows[0], "evidence_lines" in rows[0]
    header = ["bundle", "answers"] + (["K.O. rule"] if has_ko else []) + (["evidence"] if has_ev else []) + [
        "categories"]
    table = []
    for r in rows:
        cells = [r["bundle"], str(r["answers"])]
        if has_ko:
            ko = r["ko_rule"]
            cells.append(f"{ko['criterion']} ≤ {ko['floor']}" if ko else "(none)")
        if has_ev:
            cells.append(str(r["evidence_lines"]))
        cats = ", ".join(f"{c} {n}" for c, n in list(r["categories"].items())[:4])
        more = len(r["categories"]) - 4
        cells.append(cats + (f", +{more} more" if more > 0 else ""))
        table.append(cells)
    widths = [max(len(x) for x in col) for col in zip(header, *table, strict=True)]
    fmt = lambda cells: "  ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    fields = " + ".join(rows[0]["fields"])
    return "\n".join([f"{len(rows)} bundles by {fields}", fmt(header), *(fmt(c) for c in table)])


# ------------------------------------------------------------------------------------------ evidence


def evidence_rationale(criteria: Sequence[Criterion], values: Sequence[float | None], rationales: Sequence[str | None],
                       flags: Sequence[Sequence[str]], ko_key: str | None) -> str | None:
    """The rationale an evidence line carries for a several-criteria verdict (see the module doc)."""
    scored = [j for j, v in enumerate(values) if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not scored:
        return None
    flagged = [j for j in scored if any(str(f).strip() for f in flags[j])]
    if flagged:
        flagged.sort(key=lambda j: (criteria[j].key != ko_key, j))
        return rationales[flagged[0]]

    def level(j: int) -> float:
        v = float(values[j])  # type: ignore[arg-type]
        return (v - 1) / 4 if criteria[j].is_scale else v

    return rationales[min(scored, key=lambda j: (level(j), j))]


@dataclass(frozen=True)
class Evidence:
    """A bundle's evidence for the holistic call, and the red flags it carries (with their answer)."""

    lines: tuple[str, ...]
    omitted: int
    flags: tuple[tuple[str, str], ...]  # (prompt_id, red flag) of every member verdict


def bundle_evidence(s: Session, from_run: store.Run, bundle_ids: Sequence[int],
                    category_field: str = CATEGORY_FIELD) -> dict[int, Evidence]:
    """Per bundle, its evidence lines from a per-answer run's verdicts (members in dataset order)."""
    rubric = store.rubric_value(s, s.get(store.RubricRow, from_run.rubric_id))
    crit_col = {c.id: j for j, c in enumerate(store.criterion_rows(s, from_run.rubric_id))}
    ko_key = rubric.ko_rule.criterion if rubric.ko_rule else None
    BE, E, V = store.BundleExample, store.Example, store.Verdict
    members: dict[int, list[tuple[int, str, dict]]] = {b: [] for b in bundle_ids}
    for bid, ex_id, ext, meta in s.execute(
        select(BE.bundle_id, E.id, E.ext_id, E.meta).join(E, E.id == BE.example_id)
        .where(BE.bundle_id.in_(list(bundle_ids))).order_by(BE.bundle_id, BE.position)
    ):
        members[bid].append((ex_id, ext, meta or {}))
    ex_ids = [m[0] for ms in members.values() for m in ms]
    k = len(rubric.criteria)
    verdicts: dict[int, tuple[list, list, list]] = {}
    for i in range(0, len(ex_ids), 5000):
        for ex, cid, value, rationale, red in s.execute(
            select(V.example_id, V.criterion_id, V.value, V.rationale, V.red_flags)
            .where(V.run_id == from_run.id, V.example_id.in_(ex_ids[i : i + 5000]))
        ):
            vals, rats, flg = verdicts.setdefault(ex, ([None] * k, [None] * k, [()] * k))
            j = crit_col[cid]
            vals[j], rats[j], flg[j] = value, rationale, tuple(str(f) for f in (red or ()))
    out = {}
    for bid, ms in members.items():
        lines, flags, omitted = [], [], 0
        for ex_id, ext, meta in ms:
            vals, rats, flg = verdicts.get(ex_id, ([None] * k, [None] * k, [()] * k))
            scores = [(c.key, c.value_text(int(v))) for c, v in zip(rubric.criteria, vals, strict=True)
                      if v is not None]
            if not scores:
                omitted += 1
                continue
            red = list(dict.fromkeys(f for j, fs in enumerate(flg) if vals[j] is not None for f in fs))
            rationale = evidence_rationale(rubric.criteria, vals, rats, flg, ko_key)
            lines.append(holistic.evidence_line(meta.get(category_field), ext, scores, red, rationale))
            flags += [(ext, f) for f in red]
        out[bid] = Evidence(tuple(lines), omitted, tuple(flags))
    return out


def member_flags(s: Session, run: store.Run) -> dict[int, tuple[tuple[str, str], ...]]:
    """Per bundle of a bundle-level run, the red flags of its evidence: (prompt_id, flag) pairs."""
    h = run.harness or {}
    source = s.get(store.Run, h.get("from_run_id"))
    ids = list(s.scalars(select(store.RunBundle.bundle_id).where(store.RunBundle.run_id == run.id)))
    if source is None or not ids:
        return {b: () for b in ids}
    ev = bundle_evidence(s, source, ids, h.get("category_field") or CATEGORY_FIELD)
    return {b: e.flags for b, e in ev.items()}


# ------------------------------------------------------------------------------------------ runs


def _per_answer_run(s: Session, ref: str | int, ds: store.Dataset) -> store.Run:
    run = store.get_run(s, ref)
    h = run.harness or {}
    if is_bundle_run(run):
        raise ValueError(f"--from-run {run.name!r} is a bundle-level run; give the per-answer run it came from")
    if h.get("kind") == "critique":
        raise ValueError(f"--from-run {run.name!r} is a critique run; give a judge run over the answers")
    if run.dataset_id != ds.id:
        other = s.get(store.Dataset, run.dataset_id)
        raise ValueError(f"--from-run {run.name!r} judged dataset {other.name if other else '?'!r}, not {ds.name!r}")
    return run


def create_bundle_run(
    s: Session,
    *,
    from_run: str | int,
    bundle_by: Sequence[str],
    dataset: str,
    rubric: str,
    harness: Harness,
    judge,  # judges.JudgeSpec
    name: str | None = None,
    category_field: str = CATEGORY_FIELD,
) -> store.Run:
    """Store a pending bundle-level run: the bundles of ``dataset`` by ``bundle_by`` that have evidence
    in ``from_run`` (a finished per-answer run), each with its K.O. rule from ``rubric``."""
    from judgekit import judges

    judges.check_judge(judge)
    if harness.kind not in ("single", "split"):
        raise ValueError(f"a bundle-level run takes --harness single or split, not {harness.label!r}")
    if harness.shuffle or harness.logprobs or harness.layout != "shared_prefix":
        raise ValueError("a bundle-level run takes no --shuffle, --logprobs or --layout")
    holistic.variant(harness.prompt_variant)
    ds = store.get_dataset(s, dataset)
    source = _per_answer_run(s, from_run, ds)
    if source.status in UNFINISHED_STATUSES:
        raise ValueError(f"--from-run {source.name!r} is {source.status}: the evidence must be final — finish it "
                         f"with `judgekit resume {source.name}` first")
    rubric_row = store.get_rubric_row(s, rubric)
    rub = store.rubric_value(s, rubric_row)
    fields = check_fields(bundle_by)
    rows = ensure_bundles(s, ds, fields)
    scored = _scored_members(s, source.id, [b.id for b in rows])
    chosen = [b for b in rows if scored.get(b.id)]
    if not chosen:
        raise ValueError(f"no bundle of dataset {ds.name!r} by {' + '.join(fields)} has an answer with a scored "
                         f"verdict in run {source.name!r}: no evidence to judge")
    rules = [ko_rule_of(rub, b) for b in chosen]
    judge_row = judges.store_judge(s, judge)
    spec = {
        **dataclasses.replace(harness, level="bundle").to_dict(),
        "bundle_by": list(fields),
        "from_run": source.name,
        "from_run_id": source.id,
        "category_field": category_field,
    }
    base = f"{ds.name}-bundle-{'+'.join(fields)}-{harness.kind}-{harness.prompt_variant}-{judge.model}"
    run = store.create_run(s, name=name or store.unique_run_name(s, base), dataset=ds, rubric=rubric_row,
                           judge=judge_row, harness=spec, example_ids=[],
                           sample={"bundle_by": list(fields), "from_run": source.name})
    s.execute(insert(store.RunBundle), [
        {"run_id": run.id, "bundle_id": b.id, "position": i, "ko_criterion": r.criterion if r else None,
         "ko_floor": r.floor if r else None}
        for i, (b, r) in enumerate(zip(chosen, rules, strict=True))
    ])
    return run


def _run_bundles(s: Session, run_id: int) -> list[tuple[store.Bundle, KORule | None]]:
    rows = s.execute(select(store.Bundle, store.RunBundle.ko_criterion, store.RunBundle.ko_floor)
                     .join(store.RunBundle, store.RunBundle.bundle_id == store.Bundle.id)
                     .where(store.RunBundle.run_id == run_id).order_by(store.RunBundle.position)).all()
    return [(b, KORule(c, int(f)) if c is not None else None) for b, c, f in rows]


def _bundle_text(s: Session, b: store.Bundle, rule: KORule | None, ev: Evidence,
                 source_name: str) -> holistic.BundleText:
    ds = s.get(store.Dataset, b.dataset_id)
    return holistic.BundleText(label=b.label, fields=bundle_fields(b), dataset=ds.name if ds else "?",
                               from_run=source_name, evidence=ev.lines, ko_rule=rule, omitted=ev.omitted)


def _source(s: Session, run: store.Run) -> store.Run:
    h = run.harness or {}
    source = s.get(store.Run, h.get("from_run_id"))
    if source is None:
        raise ValueError(f"run {run.name!r}: its per-answer run {h.get('from_run')!r} no longer exists")
    return source


def pending_calls(engine: Engine, run_id: int, harness: Harness, rubric: Rubric, crit_ids: dict[str, int]
                  ) -> Iterator[tuple[PlannedCall, holistic.BundleText]]:
    """The holistic calls still missing, bundle by bundle (the runner's hook for bundle-level runs)."""
    groups = criterion_groups(harness, rubric)
    key_of = {cid: key for key, cid in crit_ids.items()}
    with Session(engine) as s:
        run = s.get(store.Run, run_id)
        source = _source(s, run)
        source_name, category_field = source.name, (run.harness or {}).get("category_field") or CATEGORY_FIELD
        todo = _run_bundles(s, run_id)
    for i in range(0, len(todo), CHUNK):
        chunk = todo[i : i + CHUNK]
        with Session(engine) as s:
            done: dict[int, set[str]] = {}
            for bid, cid in s.execute(select(store.BundleVerdict.bundle_id, store.BundleVerdict.criterion_id)
                                      .where(store.BundleVerdict.run_id == run_id,
                                             store.BundleVerdict.bundle_id.in_([b.id for b, _ in chunk]))):
                done.setdefault(bid, set()).add(key_of.get(cid, ""))
            wanted = [(b, r) for b, r in chunk if not all(all(k in done.get(b.id, ()) for k in g) for g in groups)]
            if not wanted:
                continue
            source = s.get(store.Run, source.id)
            ev = bundle_evidence(s, source, [b.id for b, _ in wanted], category_field)
            texts = [(b, _bundle_text(s, b, r, ev[b.id], source_name)) for b, r in wanted]
        for b, text in texts:
            have = done.get(b.id, set())
            for group in groups:
                if all(k in have for k in group):
                    continue
                yield PlannedCall(None, b.label, group, bundle_id=b.id), text


# ------------------------------------------------------------------------------------------ reading back


@dataclass(frozen=True, eq=False)
class BundleVerdicts(JudgedRun):
    """A bundle-level run's verdicts aligned on its bundles (rows, in run order) × rubric criteria.

    ``values`` is NaN where unscored or not (yet) judged; ``rationales`` / ``flags`` are object arrays
    of the same shape; ``ko_rules[i]`` is the K.O. rule bundle *i* was judged under.
    """

    dataset_id: int
    dataset: str
    bundle_by: tuple[str, ...]
    from_run: str
    from_run_id: int | None
    bundle_ids: NDArray[np.int64]
    labels: tuple[str, ...]
    sizes: tuple[int, ...]
    ko_rules: tuple[KORule | None, ...]
    values: NDArray[np.float64]
    rationales: NDArray[np.object_]
    flags: NDArray[np.object_]

    def ko_scores(self) -> NDArray[np.float64]:
        """Each bundle's score on its own K.O. dimension (NaN: unscored, or no K.O. rule)."""
        out = np.full(len(self.labels), np.nan)
        for i, rule in enumerate(self.ko_rules):
            if rule is not None and rule.criterion in self.keys:
                out[i] = self.values[i, self.col(rule.criterion)]
        return out


def load_bundle_verdicts(s: Session, ref: str | int | store.Run) -> BundleVerdicts:
    """A bundle-level run's verdicts (one query), in the order of its bundles."""
    run = ref if isinstance(ref, store.Run) else store.get_run(s, ref)
    if not is_bundle_run(run):
        raise ValueError(f"run {run.name!r} is a per-answer run, not a bundle-level one")
    h = run.harness or {}
    rubric = store.rubric_value(s, s.get(store.RubricRow, run.rubric_id))
    col_of = {c.id: j for j, c in enumerate(store.criterion_rows(s, run.rubric_id))}
    bundles = _run_bundles(s, run.id)
    row_of = {b.id: i for i, (b, _) in enumerate(bundles)}
    n, k = len(bundles), len(rubric.criteria)
    values = np.full((n, k), np.nan)
    rationales = np.full((n, k), None, dtype=object)
    flags = np.empty((n, k), dtype=object)
    flags.fill(())
    BV = store.BundleVerdict
    for bid, cid, value, rationale, red in s.execute(
        select(BV.bundle_id, BV.criterion_id, BV.value, BV.rationale, BV.red_flags).where(BV.run_id == run.id)
    ):
        i, j = row_of[bid], col_of[cid]
        values[i, j] = np.nan if value is None else value
        rationales[i, j] = rationale
        flags[i, j] = tuple(str(f) for f in (red or ()))
    judge = s.get(store.Judge, run.judge_id)
    ds = s.get(store.Dataset, run.dataset_id)
    # as the per-answer level names it (scale.load_verdicts): the variant, and the user's template if any
    variant = h.get("target_variant") if h.get("kind") == "critique" else prompts.prompt_label(h)
    return BundleVerdicts(
        key=f"run:{run.name}", name=run.name, run_id=run.id, judge=store.judge_label(judge) if judge else "?",
        judge_id=run.judge_id, variant=str(variant or "default"), harness=dict(h), rubric=rubric,
        rubric_id=run.rubric_id, dataset_id=run.dataset_id, dataset=ds.name if ds else "?",
        bundle_by=tuple(h.get("bundle_by") or ()), from_run=str(h.get("from_run") or ""),
        from_run_id=h.get("from_run_id"), bundle_ids=np.array([b.id for b, _ in bundles], dtype=np.int64),
        labels=tuple(b.label for b, _ in bundles), sizes=tuple(b.size for b, _ in bundles),
        ko_rules=tuple(r for _, r in bundles), values=values, rationales=rationales, flags=flags,
    )


# ------------------------------------------------------------------------------------------ critique


def copy_run_bundles(s: Session, source_id: int, run_id: int) -> None:
    """Give a critique run its target's bundles (with their K.O. rules)."""
    rows = s.execute(select(store.RunBundle).where(store.RunBundle.run_id == source_id)).scalars().all()
    if rows:
        s.execute(insert(store.RunBundle), [
            {"run_id": run_id, "bundle_id": r.bundle_id, "position": r.position, "ko_criterion": r.ko_criterion,
             "ko_floor": r.ko_floor} for r in rows])


def critique_pending_calls(engine: Engine, run_id: int, crit_ids: dict[str, int], checks: Sequence[str], *,
                           applicable: Callable[..., list[str]], key: Callable[[str, str], str]
                           ) -> Iterator[tuple[PlannedCall, holistic.BundleCritiqueText]]:
    """The critique calls still missing for a bundle-level run: one per (stored dimension rationale,
    applicable check), bundle by bundle (the hook :func:`judgekit.critique.pending_calls` delegates to).
    The critique's own rules come in as ``applicable`` (which checks apply to a rationale) and ``key`` (a
    check's criterion key), so this module never imports :mod:`judgekit.critique`, which imports it."""
    with Session(engine) as s:
        run = s.get(store.Run, run_id)
        target = s.get(store.Run, (run.harness or {}).get("target_run_id"))
        if target is None:
            raise ValueError(f"critique run {run.name!r}: its target run no longer exists")
        v = load_bundle_verdicts(s, target)
        source = _source(s, target)
        ev = bundle_evidence(s, source, [int(b) for b in v.bundle_ids],
                             (target.harness or {}).get("category_field") or CATEGORY_FIELD)
        bundles = dict(_run_bundles(s, target.id))
        texts = {b.id: _bundle_text(s, b, r, ev[b.id], source.name) for b, r in bundles.items()}
        done = {(bid, cid) for bid, cid in s.execute(
            select(store.BundleVerdict.bundle_id, store.BundleVerdict.criterion_id)
            .where(store.BundleVerdict.run_id == run_id))}
    for i, bid in enumerate(int(b) for b in v.bundle_ids):
        rule = v.ko_rules[i]
        ko = None
        if rule is not None and rule.criterion in v.keys:
            score = v.values[i, v.col(rule.criterion)]
            ko = prompts.KOContext(rule.criterion, rule.floor, None if np.isnan(score) else int(score))
        evidence_flags = tuple(f for _, f in ev[bid].flags)
        for j, dim in enumerate(v.rubric.criteria):
            value = v.values[i, j]
            if np.isnan(value):
                continue
            rationale, red = v.rationales[i, j] or "", v.flags[i, j]
            # A safety flag in the evidence asks catches_safety once per bundle — of the K.O. dimension's
            # rationale, where the reconciliation shows — not once per dimension (which would count one
            # bundle's K.O. score four times); other dimensions are asked when they name a problem themselves.
            own = evidence_flags if ko is not None and dim.key == ko.criterion else ()
            item = holistic.BundleCritiqueText(texts[bid], dim, int(value), rationale, red, ko, evidence_flags)
            for check in applicable(dim, int(value), rationale, red, ko, checks, evidence_flags=own):
                ckey = key(dim.key, check)
                if ckey not in crit_ids or (bid, crit_ids[ckey]) in done:
                    continue
                yield PlannedCall(None, v.labels[i], (ckey,), bundle_id=bid), item
