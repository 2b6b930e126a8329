"""The grouping planner: which criteria can share a call, from a pilot of ``single`` and ``split``.

Where this sits: analysis, on :mod:`judgekit.reports` (sources), :mod:`judgekit.audit` (the paired
comparison of two harnesses on the same answers), :mod:`judgekit.noise` (the judge's noise floor) and
:mod:`judgekit.runner` (the cost model, and creating the recommended run). ``judgekit plan-groups`` and
the Compare page show a :class:`Plan`.

The pilot is a ``single`` run and a ``split`` run over the same answers (``--sample N --seed S``), best
with ``--repeat 2`` on one of them for the noise floor. For every criterion pair the planner reads:

* the **induced association**: phi(single) − phi(split) on the answers both judged, with its 95 %
  interval — what sharing one call did to the pair (:func:`judgekit.audit.audit_evidence`);
* the pair's **noise floor**: how far phi moves between two repeats (:func:`judgekit.noise.noise_floor`;
  0 when there are no repeats, and the plan says so).

A pair is **dependent** — it may not share a call — when its induced association is beyond the floor
(:func:`judgekit.noise.beyond_floor`: shown, and larger than the floor), or when it cannot be measured
(phi undefined: a criterion constant in the pilot). The per-pair 95 % intervals are deliberately *not*
corrected for multiple comparisons: a correction would let more dependent pairs share a call.

Every grouping of the criteria into calls (every set partition; exact up to :data:`MAX_EXACT` criteria,
a greedy search beyond) is priced with the run cost model (calls, tokens and USD per answer) and scored
by the worst induced |Δphi| among its co-grouped pairs. The **recommendation** is the cheapest grouping
— fewest calls, then the smallest worst |Δphi|, then fewest tokens — in which no co-grouped pair is
dependent; with a budget (``calls=N`` calls per answer, or ``usd=X`` for one run over the dataset's
answers), the least-distorting grouping within it. The **trade-off curve** gives, for every number of
calls per answer, the least-distorting grouping with that many calls. The pilot's single call already
shares every pair, so its Δphi also carries pulls through the third criteria in that call; a smaller
group has fewer such paths — the plan errs on the side of splitting.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from judgekit import audit, noise, reports, runner, store
from judgekit.harness import Harness

__all__ = ["MAX_EXACT", "Budget", "Grouping", "PairRisk", "Plan", "parse_budget", "plan_groups",
           "render_plan", "spec_of", "start_recommended"]

MAX_EXACT = 9
"""Up to this many criteria every grouping is tried (21,147 for 9); beyond, a greedy search."""


@dataclass(frozen=True)
class Budget:
    """``calls``: at most this many calls per answer; ``usd``: at most this many dollars for one run of
    the grouping over every answer of the dataset."""

    calls: int | None = None
    usd: float | None = None

    def to_dict(self) -> dict:
        return {"calls": self.calls, "usd": self.usd}


def parse_budget(text: str | None) -> Budget | None:
    """``calls=N`` or ``usd=X`` (``None`` for no budget); a bad value raises ``ValueError`` naming it."""
    if not text:
        return None
    what, sep, value = text.partition("=")
    try:
        if sep and what.strip() == "calls" and int(value) >= 1:
            return Budget(calls=int(value))
        if sep and what.strip() == "usd" and float(value) >= 0 and math.isfinite(float(value)):
            return Budget(usd=float(value))
    except ValueError:
        pass
    raise ValueError(f"--budget {text!r}: write calls=N (calls per answer, N ≥ 1) or usd=X (dollars for one run)")


@dataclass(frozen=True)
class PairRisk:
    """One criterion pair in the pilot: its induced association, its floor, and whether it may share a call."""

    a: str
    b: str
    induced: audit.Estimate
    floor: float  # nan: no repeats (counted as 0)
    dependent: bool
    why: str

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "induced": self.induced.to_dict(),
                "floor": self.floor if math.isfinite(self.floor) else None, "dependent": self.dependent,
                "why": self.why}


@dataclass(frozen=True)
class Grouping:
    """One way to put the criteria into calls, priced and scored."""

    groups: tuple[tuple[str, ...], ...]
    spec: str
    calls_per_answer: int
    prompt_tokens_per_answer: float
    completion_tokens_per_answer: float
    usd_per_answer: float | None
    usd_for_dataset: float | None
    worst_pair: tuple[str, str] | None  # the co-grouped pair with the largest induced |Δphi|
    worst: float  # its |Δphi| (0 with nothing co-grouped; inf when a co-grouped pair is undefined)
    worst_bound: float  # the largest |end of interval| over co-grouped pairs
    within_floor: bool  # no co-grouped pair is dependent
    dependent_pairs: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        return {
            "harness": self.spec,
            "groups": [list(g) for g in self.groups],
            "calls_per_answer": self.calls_per_answer,
            "prompt_tokens_per_answer": round(self.prompt_tokens_per_answer, 1),
            "completion_tokens_per_answer": round(self.completion_tokens_per_answer, 1),
            "usd_per_answer": self.usd_per_answer,
            "usd_for_dataset": self.usd_for_dataset,
            "worst_induced_pair": list(self.worst_pair) if self.worst_pair else None,
            "worst_induced_abs_dphi": self.worst,  # inf (an undefined co-grouped pair) → null in JSON
            "worst_induced_bound": self.worst_bound,
            "within_floor": self.within_floor,
            "dependent_pairs_cogrouped": [list(p) for p in self.dependent_pairs],
        }


@dataclass(frozen=True)
class Plan:
    single: str
    split: str
    dataset: str
    rubric: str
    n: int  # answers both pilot runs judged
    judge: str
    floor: noise.NoiseFloor | None
    pairs: list[PairRisk]
    recommended: Grouping
    cheapest_within_floor: Grouping
    split_grouping: Grouping
    single_grouping: Grouping
    curve: list[Grouping]
    budget: Budget | None
    why: str
    search: str
    run: dict = field(default_factory=dict)
    command: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        rec, split = self.recommended, self.split_grouping
        return {
            "pilot": {"single": self.single, "split": self.split, "dataset": self.dataset, "rubric": self.rubric,
                      "n": self.n, "judge": self.judge},
            "harness": rec.spec,
            "recommended": rec.to_dict(),
            "cheapest_within_floor": self.cheapest_within_floor.to_dict(),
            "split": split.to_dict(),
            "single": self.single_grouping.to_dict(),
            "saving_vs_split": {
                "calls": 1 - rec.calls_per_answer / split.calls_per_answer,
                "prompt_tokens": 1 - rec.prompt_tokens_per_answer / split.prompt_tokens_per_answer,
            },
            "why": self.why,
            "budget": self.budget.to_dict() if self.budget else None,
            "noise_floor": None if self.floor is None else {
                "group": self.floor.group, "runs": self.floor.runs[:2], "harness": self.floor.harness,
                "temperature": self.floor.temperature, "n": self.floor.n},
            "pairs": [p.to_dict() for p in self.pairs],
            "curve": [g.to_dict() for g in self.curve],
            "search": self.search,
            "run": self.run,
            "command": self.command,
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------- groupings


def spec_of(groups: Sequence[Sequence[str]], keys: Sequence[str]) -> str:
    """The ``--harness`` spec of a grouping: ``single``, ``split`` or ``grouped:a+b|c|…`` (rubric order)."""
    if len(groups) == 1 and len(keys) > 1:
        return "single"
    if all(len(g) == 1 for g in groups):
        return "split"
    return "grouped:" + "|".join("+".join(g) for g in groups)


def _partitions(items: list[str]) -> Iterator[list[list[str]]]:
    """Every set partition of ``items`` (groups and members in the items' order)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in _partitions(rest):
        yield [[first]] + smaller
        for i in range(len(smaller)):
            yield smaller[:i] + [[first] + smaller[i]] + smaller[i + 1:]


def _greedy(keys: list[str], worst_of) -> list[list[list[str]]]:
    """Beyond :data:`MAX_EXACT` criteria: from split, merge the two groups whose union is least distorted,
    one merge at a time — one grouping per number of calls."""
    groups = [[k] for k in keys]
    out = [list(map(list, groups))]
    while len(groups) > 1:
        best = min(((i, j) for i in range(len(groups)) for j in range(i + 1, len(groups))),
                   key=lambda ij: worst_of(groups[ij[0]] + groups[ij[1]]))
        i, j = best
        groups = [g for x, g in enumerate(groups) if x not in (i, j)] + [groups[i] + groups[j]]
        out.append(list(map(list, groups)))
    return out


# --------------------------------------------------------------------------------------------- the plan


def _pair_risks(single: reports.Source, split: reports.Source, floor: noise.NoiseFloor | None,
                seed: int) -> list[PairRisk]:
    keys = split.keys
    ev = audit.audit_evidence([split.binary, single.binary], ["split", "single"], keys, reference=0, seed=seed)
    out = []
    for e in ev.pairs:
        induced = e.shift["single"]
        f = floor.pair_floor(e.a, e.b) if floor is not None else math.nan
        shown = f"{induced.value:+.2f} [{induced.lo:+.2f}, {induced.hi:+.2f}]" if induced.defined else ""
        fl = f"{f:.2f}" if math.isfinite(f) else "0 (unknown: no repeats)"
        if not induced.defined:
            dependent, why = True, f"cannot be measured ({induced.reason}): kept apart"
        elif noise.beyond_floor(induced, f):
            dependent, why = True, f"single − split {shown} is beyond the floor {fl}"
        else:
            dependent = False
            why = (f"single − split {shown}: not shown" if not (induced.lo > 0 or induced.hi < 0)
                   else f"single − split {shown} is within the floor {fl}")
        out.append(PairRisk(e.a, e.b, induced, f, dependent, why))
    return out


def plan_groups(s: Session, single_ref: str | int, split_ref: str | int, *, budget: Budget | None = None,
                seed: int = 0) -> Plan:
    """The plan for a pilot: ``single_ref`` asked every criterion in one call, ``split_ref`` one per call,
    over the same answers."""
    single_run, split_run = store.get_run(s, single_ref), store.get_run(s, split_ref)
    for run, kind in ((single_run, "single"), (split_run, "split")):
        if (run.harness or {}).get("kind") != kind:
            raise ValueError(f"run {run.name!r} is not a {kind} run (harness {store.harness_label(run.harness)}): "
                             f"plan-groups --from-runs takes a single run and a split run")
    if single_run.dataset_id != split_run.dataset_id or single_run.rubric_id != split_run.rubric_id:
        raise ValueError(f"runs {single_run.name!r} and {split_run.name!r} do not share a dataset and a rubric")
    S, P = reports.load_sources(s, [single_run.name, split_run.name])
    keys = P.keys
    if len(keys) < 2:
        raise ValueError("planning a grouping needs at least two criteria both runs judged")
    both = S.covered & P.covered
    n = int(both.sum())
    if n == 0:
        raise ValueError(f"runs {single_run.name!r} and {split_run.name!r} have no scored answer in common")
    floor = noise.find_floor(s, [split_run, single_run])
    notes = [] if floor is not None else [noise.UNKNOWN_FLOOR]
    risks = _pair_risks(S, P, floor, seed)
    risk = {(r.a, r.b): r for r in risks} | {(r.b, r.a): r for r in risks}

    ds = s.get(store.Dataset, split_run.dataset_id)
    rubric = s.get(store.RubricRow, split_run.rubric_id)
    judge = s.get(store.Judge, single_run.judge_id)
    n_dataset = len(reports.example_index(s, ds.id))
    costs = runner.cost_model(s, dataset=ds.name, rubric=rubric.name, harness=Harness.from_dict(single_run.harness),
                              model=judge.model, kind=judge.kind)

    def co_pairs(groups: Sequence[Sequence[str]]) -> list[PairRisk]:
        return [risk[(a, b)] for g in groups for i, a in enumerate(g) for b in g[i + 1:]]

    def worst_of(group: Sequence[str]) -> float:
        return max((abs(r.induced.value) if r.induced.defined else math.inf for r in co_pairs([group])), default=0.0)

    def grouping(groups: Sequence[Sequence[str]]) -> Grouping:
        ordered = tuple(sorted((tuple(sorted(g, key=keys.index)) for g in groups), key=lambda g: keys.index(g[0])))
        est = costs.estimate(ordered, n_dataset)
        pairs = co_pairs(ordered)
        worst_pair, worst, bound = None, 0.0, 0.0
        for r in pairs:
            size = abs(r.induced.value) if r.induced.defined else math.inf
            if worst_pair is None or size > worst:
                worst_pair, worst = (r.a, r.b), size
            bound = max(bound, max(abs(r.induced.lo), abs(r.induced.hi)) if r.induced.defined else math.inf)
        dependent = tuple((r.a, r.b) for r in pairs if r.dependent)
        per = max(n_dataset, 1)
        return Grouping(ordered, spec_of(ordered, keys), len(ordered), est.prompt_tokens / per,
                        est.completion_tokens / per, None if est.usd is None else est.usd / per, est.usd,
                        worst_pair, worst, bound, not dependent, dependent)

    if len(keys) <= MAX_EXACT:
        candidates = [grouping(p) for p in _partitions(list(keys))]
        search = f"exact: all {len(candidates)} groupings of {len(keys)} criteria"
    else:
        candidates = [grouping(p) for p in _greedy(list(keys), worst_of)]
        search = f"greedy: {len(keys)} criteria are too many to try every grouping (> {MAX_EXACT})"

    def distortion(g: Grouping) -> tuple:
        return (g.worst, g.worst_bound, g.prompt_tokens_per_answer)

    curve = [min((g for g in candidates if g.calls_per_answer == c), key=distortion)
             for c in sorted({g.calls_per_answer for g in candidates})]
    safe = [g for g in candidates if g.within_floor]
    cheapest = min(safe, key=lambda g: (g.calls_per_answer, *distortion(g)))
    split_g = grouping([[k] for k in keys])
    single_g = grouping([list(keys)])
    recommended, why = cheapest, _why(cheapest, split_g, risks, floor)
    if budget is not None:
        if budget.usd is not None and any(g.usd_for_dataset is None for g in candidates):
            raise ValueError(f"--budget usd: no price for model {judge.model!r} (add it to prices.yaml)")
        fits = [g for g in candidates if (budget.calls is None or g.calls_per_answer <= budget.calls)
                and (budget.usd is None or (g.usd_for_dataset or 0.0) <= budget.usd + 1e-12)]
        if not fits:
            cheapest_cost = min(candidates, key=lambda g: (g.usd_for_dataset or 0.0))
            raise ValueError(f"--budget {budget.to_dict()}: no grouping fits; the cheapest, {cheapest_cost.spec}, "
                             f"costs ${cheapest_cost.usd_for_dataset:.4f} for the {n_dataset} answers")
        recommended = min(fits, key=lambda g: (*distortion(g), g.calls_per_answer))
        why = _why_budget(recommended, budget, cheapest)
    run_args, command = _recommended_run(s, single_run, judge, ds.name, rubric.name, recommended.spec)
    return Plan(single_run.name, split_run.name, ds.name, rubric.name, n, store.judge_label(judge), floor, risks,
                recommended, cheapest, split_g, single_g, curve, budget, why, search, run_args, command, notes)


def _why(best: Grouping, split: Grouping, risks: Sequence[PairRisk], floor: noise.NoiseFloor | None) -> str:
    dependent = [r for r in risks if r.dependent]
    floor_text = ("the noise floor measured on repeats " + ", ".join(floor.runs[:2]) if floor is not None
                  else "a floor of 0 (no repeat runs)")
    if best.calls_per_answer == split.calls_per_answer:
        if len(dependent) == len(risks):
            return (f"split: every pair of criteria shows an induced association beyond {floor_text} "
                    f"({len(risks)} of {len(risks)} pairs), so no two criteria may share a call")
        return (f"split: the pairs that may not share a call ({len(dependent)} of {len(risks)}) leave no "
                "grouping with fewer calls")
    apart = "; ".join(f"{r.a} × {r.b}" for r in dependent) or "none"
    cogrouped = ", ".join(f"{a} × {b}" for g in best.groups for i, a in enumerate(g) for b in g[i + 1:])
    return (f"{best.calls_per_answer} calls per answer instead of {split.calls_per_answer} "
            f"({1 - best.calls_per_answer / split.calls_per_answer:.0%} fewer): every co-grouped pair "
            f"({cogrouped}) stays within {floor_text}; kept apart, induced beyond it: {apart}")


def _why_budget(best: Grouping, budget: Budget, cheapest: Grouping) -> str:
    limit = f"at most {budget.calls} calls per answer" if budget.calls is not None else f"at most ${budget.usd:g}"
    text = f"the least-distorting grouping with {limit}: worst induced |Δphi| {best.worst:.2f}"
    if best.worst_pair:
        text += f" ({best.worst_pair[0]} × {best.worst_pair[1]})"
    if best.within_floor:
        return text + "; every co-grouped pair stays within the noise floor"
    pairs = ", ".join(f"{a} × {b}" for a, b in best.dependent_pairs)
    return (text + f"; the budget forces pairs beyond the floor into one call ({pairs}) — the cheapest grouping "
            f"within the floor needs {cheapest.calls_per_answer} calls ({cheapest.spec})")


def _recommended_run(s: Session, pilot: store.Run, judge: store.Judge, dataset: str, rubric: str,
                     spec: str) -> tuple[dict, str]:
    """What starting the recommended grouping on the pilot's answers takes: the run's arguments and the CLI
    command (the pilot's judge, harness options and sample)."""
    h = dict(pilot.harness or {})
    sample = dict(pilot.sample or {})
    params = judge.params or {}
    args = {
        "dataset": dataset, "rubric": rubric, "harness": spec,
        "order": h.get("order", "verdict_first"), "structured": h.get("structured", "auto"),
        "prompt_variant": h.get("prompt_variant", "default"), "layout": h.get("layout", "shared_prefix"),
        "logprobs": bool(h.get("logprobs")), "base_url": judge.base_url, "model": judge.model,
        "judge_kind": judge.kind, "api_key_env": judge.api_key_env,
        "temperature": float(params.get("temperature", 0.0)),
        "limit": sample.get("limit"), "sample": sample.get("sample"), "seed": int(sample.get("seed") or 0),
    }
    cmd = ["judgekit", "run", "--dataset", dataset, "--rubric", rubric, "--harness", spec,
           "--base-url", judge.base_url or "", "--model", judge.model or ""]
    if judge.api_key_env:
        cmd += ["--api-key-env", judge.api_key_env]
    if args["temperature"]:
        cmd += ["--temperature", f"{args['temperature']:g}"]
    for opt, default in (("order", "verdict_first"), ("structured", "auto"), ("prompt_variant", "default"),
                         ("layout", "shared_prefix")):
        if args[opt] != default:
            cmd += [f"--{opt.replace('_', '-')}", args[opt]]
    if args["logprobs"]:
        cmd.append("--logprobs")
    if args["sample"]:
        cmd += ["--sample", str(args["sample"]), "--seed", str(args["seed"])]
    elif args["limit"]:
        cmd += ["--limit", str(args["limit"])]
    return args, " ".join(shlex.quote(c) for c in cmd)


def start_recommended(s: Session, plan: Plan, *, name: str | None = None, base_url: str | None = None) -> str:
    """Create (not execute) the run of the plan's recommended grouping on the pilot's answers with the pilot's
    judge (``base_url``: where that judge is served now, e.g. the app's own simulated judge); its name."""
    from judgekit.harness import parse_harness

    a = plan.run
    harness = parse_harness(a["harness"], order=a["order"], structured=a["structured"],
                            prompt_variant=a["prompt_variant"], layout=a["layout"], logprobs=a["logprobs"],
                            seed=a["seed"])
    judge = runner.JudgeSpec(base_url=base_url or a["base_url"], model=a["model"], kind=a["judge_kind"],
                             api_key_env=a["api_key_env"], temperature=a["temperature"])
    base = name or f"{plan.dataset}-plan-{plan.recommended.calls_per_answer}calls"
    return runner.create_run(s, dataset=a["dataset"], rubric=a["rubric"], harness=harness, judge=judge,
                             limit=a["limit"], sample=a["sample"], seed=a["seed"],
                             name=name or store.unique_run_name(s, base)).name


def render_plan(plan: Plan) -> str:
    """The plan as text: recommendation and why, the pairs, the trade-off curve, the command."""
    rec = plan.recommended
    lines = [
        f"pilot: single {plan.single}, split {plan.split} — {plan.n} answers both judged; judge {plan.judge}",
        ("noise floor: repeats " + ", ".join(plan.floor.runs[:2]) + f" (n = {plan.floor.n})") if plan.floor
        else f"noise floor: {noise.UNKNOWN_FLOOR}",
        "",
        f"recommended: {rec.spec}",
        f"  {rec.calls_per_answer} calls per answer (split: {plan.split_grouping.calls_per_answer}); "
        f"{rec.prompt_tokens_per_answer:.0f} prompt tokens per answer (split: "
        f"{plan.split_grouping.prompt_tokens_per_answer:.0f})",
        f"  why: {plan.why}",
        "",
        "pairs (induced = phi single − phi split on the same answers, 95% interval; floor = repeats):",
    ]
    w = max(len(f"{r.a} × {r.b}") for r in plan.pairs)
    for r in plan.pairs:
        lines.append(f"  {r.a + ' × ' + r.b:<{w}}  {'apart' if r.dependent else 'may share':<9}  {r.why}")
    lines += ["", "trade-off (least-distorting grouping per number of calls):",
              f"  {'calls':>5} {'tokens':>8} {'usd/answer':>11} {'worst |Δphi|':>13}  within floor  grouping"]
    for g in plan.curve:
        usd = "—" if g.usd_per_answer is None else f"{g.usd_per_answer:.6f}"
        worst = "undefined" if not math.isfinite(g.worst) else f"{g.worst:.2f}"
        lines.append(f"  {g.calls_per_answer:>5} {g.prompt_tokens_per_answer + g.completion_tokens_per_answer:>8.0f} "
                     f"{usd:>11} {worst:>13}  {'yes' if g.within_floor else 'no':<12}  {g.spec}")
    lines += ["", f"search: {plan.search}", "", "run it on the pilot's answers:", f"  {plan.command}"]
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)
