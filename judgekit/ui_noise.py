"""Dashboard sections for issue 13: the judge's noise floor, criterion health and the grouping planner.

Each section is one self-contained function a page calls with its workspace (pages stay thin and keep
their layout): :func:`noise_floor_section` (Compare and Agreement, beside every harness-vs-harness
difference), :func:`planner_section` (Compare: the grouping planner with a button that starts the
recommended run on the same answers) and :func:`health_section` (Agreement). Computations are
:mod:`judgekit.noise`, :mod:`judgekit.planner` and :mod:`judgekit.health`, cached per data fingerprint;
untrusted names are escaped with :func:`judgekit.ui.md` and plotly titles with ``html.escape``.
"""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from sqlalchemy.orm import Session

from judgekit import actions, auth, health, noise, planner, signin, store, ui
from judgekit.audit import Estimate
from judgekit.webapp import empty_state

__all__ = ["health_section", "noise_floor_section", "planner_section"]


def _ci(e: Estimate | None, pct: bool = False) -> str:
    if e is None or not e.defined:
        return "undefined" if e is None or not e.reason else f"undefined: {e.reason}"
    f = (lambda x: f"{x:.0%}") if pct else (lambda x: f"{x:.2f}")
    return f"{f(e.value)} [{f(e.lo)}, {f(e.hi)}]"


def _run_ids(ws: ui.Workspace, keys) -> list[int]:
    return [ws.run(k).id for k in keys]


def _all_fps(ws: ui.Workspace) -> tuple:
    return tuple(r.fp for r in ws.runs)  # repeats of a run may be any run of the dataset


# --------------------------------------------------------------------------------------------- noise floor


@st.cache_data(max_entries=ui.CACHE_ENTRIES, show_spinner="Measuring the noise floor…")
def _floor_table(db_url: str, run_a: int, run_b: int, fps: tuple) -> tuple[pd.DataFrame, str | None]:
    with Session(store.engine_for(db_url)) as s:
        cmp = noise.flips_beside_floor(s, run_a, run_b)
    floor = cmp.floor
    rows = []
    for key, c in cmp.criteria.items():
        tr = floor.criteria.get(key) if floor else None
        rows.append({
            "criterion": key,
            "n": c.n,
            "flipped between the two runs": _ci(c.harness, True),
            "flipped between repeats (floor)": _ci(c.floor, True) if floor else "unknown",
            "test–retest κ": _ci(tr.kappa) if tr else "unknown",
            "beyond the floor": ("yes" if c.beyond else "no")
            + (f" (paired p {c.p:.2g})" if math.isfinite(c.p) else ""),
        })
    source = None if floor is None else (
        f"repeats {', '.join(floor.runs[:2])} of {floor.harness} at temperature {floor.temperature:g} (n = {floor.n})")
    return pd.DataFrame(rows), source


def noise_floor_section(ws: ui.Workspace, a: str, b: str, *, key: str) -> None:
    """The judge's noise floor beside the verdicts that flip between runs ``a`` and ``b`` (run keys)."""
    st.subheader("Noise floor")
    frame, source = _floor_table(ws.db_url, ws.run(a).id, ws.run(b).id, _all_fps(ws))
    st.dataframe(frame, hide_index=True, key=key, width="stretch")
    if source is None:
        empty_state(
            f"{noise.UNKNOWN_FLOOR.capitalize()}. On the Run page set 'Repeats of each variant' to 2, "
            "or run `judgekit run … --repeat 2`."
        )
    else:
        st.caption(ui.md(
            f"Floor: {source}. A criterion is beyond the floor when more of its verdicts flip between the two runs "
            "than between two repeats of the judge (exact paired test on the same answers, p < 0.05); "
            "within it, re-running the judge changes as many. Rates with 95% Jeffreys intervals; κ with its "
            "95% interval."))


# --------------------------------------------------------------------------------------------- planner


@st.cache_data(max_entries=ui.CACHE_ENTRIES, show_spinner="Planning groupings…")
def _plan(db_url: str, single: int, split: int, budget: str | None, fps: tuple) -> planner.Plan | str:
    with Session(store.engine_for(db_url)) as s:
        try:
            return planner.plan_groups(s, single, split, budget=planner.parse_budget(budget))
        except ValueError as e:
            return str(e)


def _curve_figure(plan: planner.Plan) -> go.Figure:
    fig = go.Figure()
    for within, name, color in ((True, "within the noise floor", "#2a9d8f"), (False, "beyond it", "#e76f51")):
        pts = [g for g in plan.curve if g.within_floor is within]
        fig.add_scatter(
            x=[g.calls_per_answer for g in pts],
            y=[g.worst if math.isfinite(g.worst) else None for g in pts],
            mode="markers", name=name, marker={"size": 13, "color": color},
            text=[html.escape(g.spec) for g in pts],
            hovertemplate="%{text}<br>%{x} calls per answer<br>worst induced |Δphi| %{y:.2f}<extra></extra>",
        )
    rec = plan.recommended
    fig.add_scatter(x=[rec.calls_per_answer], y=[rec.worst], mode="markers", name="recommended",
                    marker={"size": 22, "symbol": "circle-open", "color": "#264653", "line": {"width": 3}},
                    hoverinfo="skip")
    fig.update_layout(title="calls vs worst induced |Δphi|", xaxis_title="calls per answer",
                      yaxis_title="worst induced |Δphi| among co-grouped pairs", height=360,
                      margin={"l": 10, "r": 10, "t": 60, "b": 10}, xaxis={"dtick": 1})
    return fig


def planner_section(ws: ui.Workspace, a: str, b: str) -> None:
    """The grouping planner on the pilot A/B (one ``single`` and one ``split`` run over the same answers)."""
    st.subheader("Grouping planner")
    with Session(store.engine_for(ws.db_url)) as s:
        kinds = {k: (store.get_run(s, ws.run(k).id).harness or {}).get("kind") for k in (a, b)}
    by_kind = {v: k for k, v in kinds.items()}
    if set(by_kind) != {"single", "split"}:
        empty_state(
            "The planner reads a pilot: choose a single run and a split run over the same answers as A and B "
            "(on the Run page: variants single and split, the same sample). With 'Repeats' ≥ 2 it also "
            "measures the noise floor.")
        return
    single, split = by_kind["single"], by_kind["split"]
    c1, c2 = st.columns([1, 2])
    with c1:
        kind = ui.pick("Budget", ["none", "calls per answer", "USD for one run"], key="cmp_plan_budget_kind",
                       widget=st.radio, horizontal=True)
    budget = None
    with c2:
        if kind == "calls per answer":
            budget = f"calls={int(st.number_input('At most', 1, 50, 2, key='cmp_plan_calls'))}"
        elif kind == "USD for one run":
            budget = f"usd={float(st.number_input('At most (USD)', 0.0, 1e6, 1.0, key='cmp_plan_usd'))}"
    plan = _plan(ws.db_url, ws.run(single).id, ws.run(split).id, budget, _all_fps(ws))
    if isinstance(plan, str):
        st.warning(ui.md(plan))
        return
    rec, sp = plan.recommended, plan.split_grouping
    m1, m2, m3 = st.columns(3)
    m1.metric("Recommended calls per answer", rec.calls_per_answer,
              delta=f"{rec.calls_per_answer - sp.calls_per_answer} vs split", delta_color="inverse")
    m2.metric("Prompt tokens per answer", f"{rec.prompt_tokens_per_answer:,.0f}",
              delta=f"{rec.prompt_tokens_per_answer / sp.prompt_tokens_per_answer - 1:+.0%} vs split",
              delta_color="inverse")
    m3.metric("Worst induced |Δphi| co-grouped", ui.fmt(rec.worst if math.isfinite(rec.worst) else math.nan),
              help="The largest single − split shift in phi among the pairs the grouping puts in one call.")
    st.code(rec.spec, language=None)
    st.caption(ui.md(plan.why))
    if plan.floor is None:
        empty_state(noise.UNKNOWN_FLOOR.capitalize() + ".")
    left, right = st.columns([3, 2])
    with left:
        st.dataframe(pd.DataFrame([{
            "pair": f"{r.a} × {r.b}",
            "single − split Δphi": _ci(r.induced),
            "floor": ui.fmt(r.floor, ".2f", "0 (unknown)"),
            "may share a call": "no" if r.dependent else "yes",
        } for r in plan.pairs]), hide_index=True, key="cmp_plan_pairs", width="stretch")
    with right:
        st.plotly_chart(_curve_figure(plan), key="cmp_plan_curve", width="stretch")
    st.caption(ui.md(
        f"Pilot: {plan.single} (single) and {plan.split} (split), {plan.n} answers both judged; judge: "
        f"{plan.judge}. Δphi with its 95% interval; a pair may not share a call when its Δphi is shown and "
        f"larger than its noise floor. {plan.search}."))
    st.code(plan.command, language="bash")
    from judgekit.webapp import sim_judge_base_url

    # the simulated judge lives in this app: the pilot's address may be a server that is gone
    url = sim_judge_base_url() if plan.run["judge_kind"] == "simulated" else None
    who = signin.identity()
    allowed = signin.may(who, actions.plan_needs(plan, url), "Starting the recommended run on the pilot's judge")
    if st.button("Start the recommended run on the same answers", key="cmp_plan_start", type="primary",
                 icon=":material/play_arrow:", disabled=not allowed):
        try:
            with Session(store.engine_for(ws.db_url)) as s, s.begin():
                name = actions.start_planned_run(who, s, plan, base_url=url)
            actions.start_runs(who, ws.db_url, [name])
        except (ValueError, store.NotFound, auth.Forbidden) as e:
            st.error(ui.md(str(e)))
        else:
            st.success(ui.md(f"Started {name} ({rec.spec}) on the pilot's answers: compare it with {plan.split} "
                             "here when it is done."))


# --------------------------------------------------------------------------------------------- health


@st.cache_data(max_entries=ui.CACHE_ENTRIES, show_spinner="Checking criterion health…")
def _health(db_url: str, runs: tuple[int, ...], fps: tuple) -> health.HealthReport | str:
    with Session(store.engine_for(db_url)) as s:
        try:
            return health.health_report(s, [str(r) for r in runs])
        except ValueError as e:
            return str(e)


def health_section(ws: ui.Workspace) -> None:
    """Criterion health over the chosen runs (one per harness) against the human column, with the flags."""
    st.subheader("Criterion health")
    if not ws.runs:
        return
    keys = [r.key for r in ws.runs]
    first_of_each: dict[str, str] = {}  # default: the first run of each harness (repeats are not harnesses)
    for k in keys:
        first_of_each.setdefault(ws.run(k).harness, k)
    default = list(first_of_each.values())[:3]
    if "ag_health_runs" in st.session_state:
        st.session_state["ag_health_runs"] = [k for k in st.session_state["ag_health_runs"] if k in keys]
    else:
        st.session_state["ag_health_runs"] = default
    chosen = st.multiselect("Runs (one per harness)", keys, key="ag_health_runs", format_func=ws.label)
    if not chosen:
        st.info("Choose at least one run.", icon=":material/info:")
        return
    rep = _health(ws.db_url, tuple(ws.run(k).id for k in chosen), _all_fps(ws) + (ws.labels_fp,))
    if isinstance(rep, str):
        st.warning(ui.md(rep))
        return
    rows = []
    for k, h in rep.criteria.items():
        rows.append({
            "criterion": k,
            "test–retest κ": _ci(h.test_retest.kappa) if h.test_retest else "no repeats",
            "flips between repeats": _ci(h.test_retest.flip_rate, True) if h.test_retest else "no repeats",
            "judge vs judge κ": "; ".join(f"{_ci(p.kappa)}" for p in h.judge_vs_judge) or "one run",
            "judge vs human κ": "; ".join(_ci(r.kappa) for r in h.runs if r.kappa is not None) or "no labels",
            "prevalence of fail": _ci(h.prevalence, True) if h.prevalence else "no labels",
            "unsure labels": _ci(h.unsure, True) if h.unsure else "no labels",
            "unscored": "; ".join(f"{r.unscored.value:.0%}" for r in h.runs if r.unscored.defined),
            "cannot assess": "; ".join(f"{r.cannot_assess.value:.0%}" for r in h.runs if r.cannot_assess.defined),
            "flags": "; ".join(f.name for f in h.flags) or "—",
        })
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="ag_health", width="stretch")
    st.caption(ui.md(
        f"Runs in order: {', '.join(rep.runs)}; human column: {rep.human_judge or 'none'}. "
        f"Noise floor: {('repeats ' + ', '.join(rep.floor.runs[:2])) if rep.floor else 'unknown (no repeats)'}. "
        f"95% intervals. Low κ: upper bound below {health.KAPPA_LOW}."))
    for note in rep.notes:
        st.caption(ui.md(note))
    flagged = [(k, f) for k, h in rep.criteria.items() for f in h.flags]
    if not flagged:
        st.success("No criterion is flagged.", icon=":material/check_circle:")
    for k, f in flagged:
        box = st.warning if f.name == health.AMBIGUOUS else st.info
        box(ui.md(f"{k}: {f.name}. " + " ".join(f"{e}." if not e.endswith(".") else e for e in f.evidence)),
            icon=":material/flag:")
