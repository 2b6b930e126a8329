"""Every write the dashboard makes, checked against the person it acts for.

Pages call these instead of the store, labeling, runner, jobs and imports functions directly, so a
role is enforced where the work is done, not only by hiding a button: a viewer's session that sends a
"Delete" click anyway gets :class:`judgekit.auth.Forbidden` and nothing is written. Each function takes
the :class:`judgekit.auth.Identity` first; the CLI, run by whoever owns the machine, calls the library
directly. Labels are always saved under the signed-in name (:meth:`Identity.annotator`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import critique, imports, jobs, labeling, lease, planner, runner, store
from judgekit.auth import Action, Identity, run_action
from judgekit.rubric import Criterion

__all__ = [
    "adjudicate",
    "cancel_run",
    "create_comparison",
    "create_critique_run",
    "create_label_set",
    "create_rerun",
    "delete_run",
    "import_dataset",
    "import_labels",
    "import_rubric",
    "import_run",
    "load_demo",
    "run_needs",
    "save_labels",
    "set_adjudicator",
    "start_runs",
]

T = TypeVar("T")


# --------------------------------------------------------------------------------------------- workspace


def delete_run(who: Identity, s: Session, run_ref: str | int) -> str:
    """Delete a run with its calls and verdicts (admin); returns its name. A run some live process is
    executing is refused (its next write would fail): cancel it or let it finish first."""
    who.require(Action.DELETE, "delete runs")
    run = store.get_run(s, run_ref)
    holder = lease.executing(s, run.id)
    if holder:
        raise ValueError(f"run {run.name!r} is being executed ({holder}): cancel it on the Run page or wait for it "
                         "to finish, then delete it; nothing was deleted")
    store.delete_run(s, run)
    return run.name


def _guarded(action: Action, doing: str, fn: Callable[..., T]) -> Callable[..., T]:
    def call(who: Identity, *args: Any, **kwargs: Any) -> T:
        who.require(action, doing)
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    call.__doc__ = f"{fn.__name__}, for a person allowed to {doing} (admin)."
    return call


import_dataset = _guarded(Action.IMPORT, "import datasets", imports.import_dataset)
import_rubric = _guarded(Action.IMPORT, "import rubrics", imports.import_rubric)
import_run = _guarded(Action.IMPORT, "import runs", imports.import_run)
load_demo = _guarded(Action.IMPORT, "load the demo workspace", imports.load_demo)


def import_labels(who: Identity, s: Session, path, dataset: str, annotator: str | None = None):
    """Import a labels file (admin). Rows that name no annotator are the signed-in person's (or, on
    loopback without sign-in, the typed name's); rows that name one keep it."""
    who.require(Action.IMPORT, "import labels")
    default = who.annotator(annotator) if (annotator or who.name) else None
    return imports.import_labels(s, path, dataset, annotator=default)


# --------------------------------------------------------------------------------------------- labels


def save_labels(
    who: Identity,
    s: Session,
    example_id: int,
    values: Mapping[str, int | None],
    criteria: Sequence[Criterion],
    *,
    note: str | None = None,
    annotator: str | None = None,
) -> int:
    """:func:`labeling.save_item` under the signed-in name (annotator); returns the rows written."""
    who.require(Action.LABEL, "save labels")
    return labeling.save_item(s, example_id, who.annotator(annotator), values, criteria, note=note)


def set_adjudicator(who: Identity, s: Session, on: bool, annotator: str | None = None) -> None:
    """Make oneself an adjudicator (or a plain annotator again)."""
    who.require(Action.LABEL, "adjudicate")
    labeling.set_role(s, who.annotator(annotator), "adjudicator" if on else "annotator")


def adjudicate(
    who: Identity, s: Session, example_id: int, criterion: Criterion, value: int | None,
    annotator: str | None = None,
) -> None:
    """Settle one disagreement as oneself (who must be an adjudicator)."""
    who.require(Action.LABEL, "adjudicate")
    labeling.adjudicate(s, example_id, criterion, who.annotator(annotator), value)


def create_label_set(who: Identity, s: Session, name: str, **kwargs: Any) -> labeling.LabelSetInfo:
    who.require(Action.LABEL, "create label sets")
    return labeling.create_label_set(s, name, **kwargs)


# --------------------------------------------------------------------------------------------- runs


def _require_judge(who: Identity, judge: runner.JudgeSpec) -> None:
    action = run_action(judge.kind, judge.base_url, judge.api_key_env)
    who.require(action, f"start runs on {'this' if action == Action.RUN_PAID else 'a free'} judge")


def create_comparison(who: Identity, s: Session, *, judge: runner.JudgeSpec, **kwargs: Any) -> list[str]:
    """:func:`runner.create_comparison` if ``who`` may run this judge (paid: admin; free: annotator)."""
    _require_judge(who, judge)
    return runner.create_comparison(s, judge=judge, **kwargs)


def create_critique_run(who: Identity, s: Session, *, judge: runner.JudgeSpec, **kwargs: Any) -> store.Run:
    _require_judge(who, judge)
    return critique.create_critique_run(s, judge=judge, **kwargs)


def create_rerun(who: Identity, s: Session, base: str | int, **kwargs: Any) -> store.Run:
    """:func:`runner.create_rerun` (run B of a prompt A/B) if ``who`` may run ``base``'s judge."""
    run = store.get_run(s, base)
    who.require(run_needs(s, [run.name])[run.name], f"re-judge {run.name}")
    return runner.create_rerun(s, base, **kwargs)


def plan_needs(plan: planner.Plan, base_url: str | None = None) -> Action:
    """What starting the plan's recommended run takes: the pilot's judge decides (free or paid)."""
    a = plan.run
    return run_action(a["judge_kind"], base_url or a["base_url"], a["api_key_env"])


def start_planned_run(who: Identity, s: Session, plan: planner.Plan, *, base_url: str | None = None) -> str:
    """:func:`planner.start_recommended` (created, not executed) if ``who`` may run the pilot's judge."""
    who.require(plan_needs(plan, base_url), "start the planned run on this judge")
    return planner.start_recommended(s, plan, base_url=base_url)


def run_needs(s: Session, names: Sequence[str]) -> dict[str, Action]:
    """For each stored run, the action executing it is (its judge decides: free or paid)."""
    rows = s.execute(
        select(store.Run.name, store.Judge.kind, store.Judge.base_url, store.Judge.api_key_env)
        .join(store.Judge, store.Judge.id == store.Run.judge_id)
        .where(store.Run.name.in_(list(names)))
    )
    return {name: run_action(kind, url, key) for name, kind, url, key in rows}


def _require_runs(who: Identity, db_url: str, names: Sequence[str], doing: str) -> None:
    with Session(store.engine_for(db_url)) as s:
        needs = run_needs(s, names)
    missing = [n for n in names if n not in needs]
    if missing:
        raise store.NotFound(f"no run named {missing[0]!r}")
    for name in names:
        who.require(needs[name], f"{doing} {name}")


def start_runs(
    who: Identity, db_url: str, names: Sequence[str], *, concurrency: int = 8, sequential: bool = False
) -> list[jobs.Job]:
    """Execute (or resume) stored runs in the background, each allowed by its judge (see :func:`run_needs`)."""
    _require_runs(who, db_url, names, "start")
    return jobs.start_many(db_url, list(names), concurrency=concurrency, sequential=sequential)


def cancel_run(who: Identity, db_url: str, name: str) -> bool:
    _require_runs(who, db_url, [name], "cancel")
    return jobs.cancel(db_url, name)
