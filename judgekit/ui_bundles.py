"""The Prompt A/B page's pieces shared by both levels, and its bundle level (seed 002's holistic A/B).

Rendering only: numbers come from :mod:`judgekit.bundle_report` (bundle level), :mod:`judgekit.scale`
and :mod:`judgekit.critique`; the page (``pages/prompt_ab.py``) picks the level. Rationales, bundle
values and red flags are untrusted text: they go into dataframes and captions as plain text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from judgekit import actions, auth, bundle_report, critique, jobs, runner, scale, signin, store, ui
from judgekit.auth import Identity
from judgekit.rawtext import excerpt
from judgekit.scale import Rate
from judgekit.webapp import db_url, empty_state, session, sim_judge_base_url

__all__ = ["critique_controls", "critique_table", "holistic_view", "rate_ci"]


def rate_ci(lo: float, hi: float, pct: bool = False) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "–"
    return f"[{lo:.0%}, {hi:.0%}]" if pct else f"[{lo:+.2f}, {hi:+.2f}]"


def critique_table(qa: critique.CritiqueRates, qb: critique.CritiqueRates, key: str) -> None:
    """The rationale-quality rates of two critique runs side by side (Wilson intervals, own n per check)."""
    rows = []
    for check in dict.fromkeys([*qa.checks, *qb.checks]):
        ra, rb = qa.checks.get(check), qb.checks.get(check)
        rows.append({
            "check": check,
            "A rate": ra.rate if ra else math.nan, "A 95% CI": rate_ci(ra.lo, ra.hi, True) if ra else "–",
            "A n": ra.n if ra else 0,
            "B rate": rb.rate if rb else math.nan, "B 95% CI": rate_ci(rb.lo, rb.hi, True) if rb else "–",
            "B n": rb.n if rb else 0,
        })
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=key, column_config={
        "A rate": st.column_config.NumberColumn(format="percent"),
        "B rate": st.column_config.NumberColumn(format="percent"),
    })


def critique_controls(who: Identity, names: Sequence[str], prefix: str = "ab") -> None:
    """Start a critique run of each of ``names`` (simulated or an OpenAI-compatible critic; ``who`` needs
    the role that judge requires) and show the progress of their latest critique runs."""
    st.subheader("Critique both runs")
    st.caption(
        "A critic judges every stored rationale of A and of B against cites_evidence, justifies_level, "
        "names_fix, catches_safety and dimension_locus — one check per call — and stores it as a run."
    )
    with session() as s:
        latest = [critique.latest_critique(s, n) for n in names]
        crit_info = [(r.name, r.status) if r is not None else None for r in latest]
    choice = st.radio("Critic", ["Simulated judge", "OpenAI-compatible endpoint"], key=f"{prefix}_critic",
                      horizontal=True)
    api_key_env = None
    if choice == "Simulated judge":
        st.caption("**Simulated** — reads the markers the simulated judge planted in its rationales; it "
                   "measures nothing about a real judge's rationales.")
        kind, model, base_url = "simulated", "judgekit-sim", None
    else:
        kind = "openai"
        base_url, model, api_key_env = ui.endpoint_inputs(prefix)
    concurrency = st.number_input("Concurrency", min_value=1, max_value=64, value=8, key=f"{prefix}_concurrency")
    allowed = signin.may_run(who, kind, base_url, api_key_env, "Critiquing with this judge")
    if st.button("Critique both runs", type="primary", key=f"{prefix}_critique", disabled=not allowed):
        judge = runner.JudgeSpec(base_url=base_url or sim_judge_base_url(), model=model, kind=kind,
                                 api_key_env=api_key_env or None, max_tokens=512)
        try:
            with session() as s:
                started = [actions.create_critique_run(who, s, target=n, judge=judge).name for n in names]
            actions.start_runs(who, db_url(), started, concurrency=int(concurrency))
        except (ValueError, store.NotFound, auth.Forbidden) as e:
            st.error(ui.md(e))
        else:
            st.success(ui.md(f"Started {', '.join(started)}."))
            crit_info = [(n, "running") for n in started]
    for info in crit_info:
        if info is None:
            continue
        job = jobs.get(db_url(), info[0])
        if job is not None and job.alive:
            p = job.progress
            st.progress(p.fraction if p else 0.0,
                        text=ui.md(f"{info[0]}: {p.done_calls if p else 0}/{p.total_calls if p else '?'} calls"))
        elif job is not None and job.error:
            st.error(ui.md(f"{info[0]}: {job.error}"))
        else:
            st.caption(ui.md(f"{info[0]}: {info[1]}"))
    if any(info and (j := jobs.get(db_url(), info[0])) is not None and j.alive for info in crit_info):
        st.button("Refresh", key=f"{prefix}_refresh")


def _pct(r: Rate) -> str:
    return "–" if not r.n else f"{r.rate:.0%} ({r.k}/{r.n})"


def _ci(e: bundle_report.MeanCI) -> str:
    if math.isfinite(e.lo):
        return f"[{e.lo:+.2f}, {e.hi:+.2f}]"
    return e.note or "–"


def holistic_view(who: Identity) -> None:
    """The bundle level of the Prompt A/B page: two holistic runs (default vs hardened), their rationale
    quality, scores per bundle with mean |Δ| to a reference holistic run, K.O. per bundle, cost and time."""
    with session() as s:
        candidates = scale.ab_candidates(s, "bundle")
    if len(candidates) < 2:
        empty_state(
            "The holistic A/B needs two bundle-level runs, e.g. on the demo: `judgekit demo --holistic-ab`, or "
            "`judgekit run --level bundle --from-run RUN --bundle-by model --bundle-by pack --dataset demo "
            "--rubric demo-scale --prompt-variant default …` and the same with `--prompt-variant hardened`."
        )
        return
    pair = ui.pick_ab_pair(
        candidates, what="Holistic run", key="abb",
        describe=lambda c: f"{c['variant']} — {c['judge']} (by {' + '.join(c['bundle_by'])})",
        same=("dataset_id", "rubric_id", "bundle_by"),
        no_partner=lambda c: f"No other holistic run of rubric {c['rubric']} over the same bundles to compare with.",
    )
    if pair is None:
        return
    ca, _ = pair
    a, b = (c["name"] for c in pair)
    refs = [c["name"] for c in candidates if c["name"] not in (a, b) and c["dataset_id"] == ca["dataset_id"]
            and c["bundle_by"] == ca["bundle_by"]]
    ref = st.selectbox("Reference holistic run for mean |Δ| (e.g. a stronger judge)", ["(none)", *refs],
                       key="abb_ref", index=1 if refs else 0)
    try:
        with session() as s:
            crit_runs = [critique.latest_critique(s, name) for name in (a, b)]
            crit = None
            if all(r is not None for r in crit_runs):
                crit = tuple(critique.critique_rates(s, r) for r in crit_runs)
            rep = bundle_report.ab_report(s, a, b, None if ref == "(none)" else ref, crit)  # type: ignore[arg-type]
    except (ValueError, store.NotFound) as e:
        st.error(ui.md(e))
        return
    md = ui.md  # names come from files and metadata: shown as inert text
    for w in rep.warnings:
        st.warning(md(w))
    (st.warning if rep.n < bundle_report.MIN_BUNDLES else st.info)(rep.strength, icon=":material/straighten:")
    st.caption(md(f"Bundles of {rep.a.dataset} by {' + '.join(rep.a.bundle_by)}; evidence: per-answer run "
                  f"{rep.a.from_run}. A = {rep.a.key} ({rep.a.variant}), B = {rep.b.key} ({rep.b.variant}); "
                  f"judge {rep.a.judge}; reference {rep.reference or 'none'}"
                  + (f" ({rep.reference_judge})" if rep.reference_judge else "") + "."))

    st.subheader("Rationale quality")
    if rep.critique:
        qa, qb = rep.critique
        st.caption(md(f"Critique runs: A {qa.critique}, B {qb.critique} ({qa.judge}); one check per call; n "
                      f"counts dimension rationales from {rep.n} bundles; checks that do not apply are not asked."))
        critique_table(qa, qb, "abb_quality")
    else:
        st.info("No critique run of both yet: start one below.", icon=":material/lightbulb:")

    st.subheader("Scores")
    rows = []
    for d in [*rep.dimensions.values(), rep.overall]:
        rows.append({
            "dimension": d.key, "bundles": d.n, "shift B − A": d.shift.value, "shift 95% CI": _ci(d.shift),
            "mean|Δ| A": d.mad_a.value, "mean|Δ| B": d.mad_b.value, "Δ mean|Δ| (B − A)": d.mad_diff.value,
            "Δ 95% CI": _ci(d.mad_diff), "n ref": d.mad_a.n, "words A": d.words_a.value, "words B": d.words_b.value,
        })
    st.dataframe(pd.DataFrame(rows).round(3), hide_index=True, key="abb_scores")

    if rep.ko:
        k = rep.ko
        st.subheader("K.O. per bundle (each bundle's own rule)")
        m = st.columns(4)
        m[0].metric("Disqualified A", _pct(k.disqualified[0]))
        m[1].metric("Disqualified B", _pct(k.disqualified[1]))
        m[2].metric("Concordance A↔B", _pct(k.concordance),
                    help=f"95% CI {rate_ci(k.concordance.lo, k.concordance.hi, True)}")
        if k.reference_agreement:
            ra, rb = k.reference_agreement
            m[3].metric("Agree with reference A / B", f"{ra.rate:.0%} / {rb.rate:.0%}" if ra.n and rb.n else "–",
                        help=f"n = {ra.n} bundles")
        for tab, r in zip(st.tabs([ui.md(f"A: {a}"), ui.md(f"B: {b}")]), k.reconciliation, strict=True):
            with tab:
                st.caption(f"{len(r.contradictions)} contradictory verdicts of {r.flagged} bundles with a "
                           f"safety-relevant red flag in the evidence or the verdict; reconciled "
                           f"{_pct(r.reconciled)}; {r.format_only_flags} format-only red flags set aside.")
                st.dataframe(pd.DataFrame(
                    [{"bundle": c["bundle"], "K.O. dimension": c["criterion"], "score": c["ko_score"],
                      "floor": c["floor"],
                      "signals": "; ".join(f"{x['where']} {x['prompt_id'] or x['dimension']}: {excerpt(x['text'], 80)}"
                                           for x in c["signals"]),
                      "K.O. rationale": c["ko_rationale"] or ""} for c in r.contradictions],
                    columns=["bundle", "K.O. dimension", "score", "floor", "signals", "K.O. rationale"]),
                    hide_index=True, key=f"abb_contra_{r.run}")

    st.subheader("Bundles")
    dims = list(rep.dimensions)
    frame = pd.DataFrame([
        {"bundle": row["bundle"], "answers": row["answers"], "K.O. rule": row["ko_rule"] or "(none)",
         **{f"{d} A/B/ref": "/".join("–" if row[d][s] is None else str(row[d][s]) for s in ("a", "b", "reference"))
            for d in dims},
         "disqualified A": row["disqualified"]["a"], "disqualified B": row["disqualified"]["b"]}
        for row in rep.bundle_rows
    ])
    st.dataframe(frame, hide_index=True, key="abb_bundles")

    st.subheader("Cost and time")
    st.dataframe(pd.DataFrame([
        {"run": v.key, "calls": c.calls, "prompt tokens": c.prompt_tokens, "completion tokens": c.completion_tokens,
         "cached tokens": c.cached_tokens, "usd": c.usd, "wall time (s)": round(c.wall_s, 2),
         "latency p50 (s)": c.latency_p50}
        for v, c in zip((rep.a, rep.b), rep.cost, strict=True)
    ]), hide_index=True, key="abb_cost")
    critique_controls(who, [a, b], prefix="abb")
