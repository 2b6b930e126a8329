"""Prompt A/B: seed 002's A/B re-judge — one judge, two prompt variants, the same answers — with n and CIs,
the K.O. views (disqualified answers, contradictory verdicts) and the rationale critique of both runs; at
the bundle level, the same for two holistic runs (one call per bundle over its evidence)."""

import pandas as pd
import streamlit as st

from judgekit import actions, auth, critique, prompt_templates, scale, signin, store, ui, ui_bundles
from judgekit.rubric import REFERENCE_ANNOTATOR
from judgekit.webapp import db_url, empty_state, session, sim_judge_base_url

who = signin.page("Prompt A/B")
with session() as s:
    candidates = scale.ab_candidates(s)
    has_bundles = len(scale.ab_candidates(s, "bundle")) >= 2
levels = ["answers", "bundles"]
level = st.radio("Level", levels, key="ab_level", horizontal=True,
                 index=1 if has_bundles and len(candidates) < 2 else 0,
                 help="answers: each answer judged on its own; bundles: the holistic call — one score per dimension "
                      "for a bundle of answers, from their per-answer verdicts")
if level == "bundles":
    st.caption(
        "Two holistic runs of one judge over the same bundles and evidence that differ only in the prompt "
        "variant. The unit is the bundle: rates carry Wilson 95 % intervals, means a t interval over bundles. "
        "Rationales are the judge's text, shown as plain text."
    )
    ui_bundles.holistic_view(who)
    st.stop()
st.caption(
    "Two runs of one judge over the same answers that differ only in the prompt variant (e.g. `default` vs "
    "`hardened`). Rates carry Wilson 95 % intervals, means a bootstrap over answers. Rationales are the "
    "judge's text, shown as plain text."
)

EXAMPLE_TEMPLATE = """{% set system %}You are a strict reviewer of support answers.{% endset %}
Question: {{ question }}
Knowledge base: {{ context }}
Answer under review: {{ answer }}

{{ criteria }}
"""


def rejudge_form(base: str, kind: str) -> None:
    """Start run B: A's answers, judge and harness with another prompt template (and few-shot K)."""
    with st.expander(ui.md(f"Re-judge {base} with another prompt (starts a run B over the same answers)")):
        text = st.text_area(
            "Prompt template (Jinja2: {{ question }}, {{ context }}, {{ answer }}, {{ criteria }} last)",
            value=EXAMPLE_TEMPLATE, height=200, key="ab_template",
        )
        few = st.number_input("Few-shot: labelled examples per criterion", 0, 20, 0, key="ab_few_shot")
        try:
            compiled = prompt_templates.compile_template(text, "page template")
        except ValueError as e:
            st.error(ui.md(str(e)), icon=":material/error:")
            return
        st.caption(ui.md(f"Valid: {compiled.label}."))
        with session() as s:
            allowed = signin.may(who, actions.run_needs(s, [base])[base], f"Re-judging {base} on its judge")
        if st.button("Start run B", key="ab_rejudge", disabled=not allowed):
            try:
                with session() as s:
                    new = actions.create_rerun(
                        who, s, base, prompt_template=text, prompt_template_name="page template", few_shot=int(few),
                        few_shot_from="human" if few else "",
                        base_url=sim_judge_base_url() if kind == "simulated" else None,
                    )
                    name = new.name
                actions.start_runs(who, db_url(), [name])
            except (ValueError, store.NotFound, auth.Forbidden) as e:
                st.error(ui.md(str(e)))
            else:
                st.success(ui.md(f"Started {name}: when it has finished, choose it as run B."))

if len(candidates) < 2:
    empty_state(
        "The A/B re-judge needs two runs of a rubric with 1–5 criteria, e.g. on the demo: "
        "`judgekit run --dataset demo --rubric demo-scale --harness single --prompt-variant default …` "
        "and the same with `--prompt-variant hardened` or `--prompt-template FILE` (or two runs on the Run page)."
    )
    if candidates:
        with session() as s:
            only_kind = s.get(store.Judge, store.get_run(s, candidates[0]["name"]).judge_id).kind
        rejudge_form(candidates[0]["name"], only_kind)
    st.stop()

pair = ui.pick_ab_pair(
    candidates, what="Run", key="ab",
    describe=lambda c: f"{c['variant']} — {c['judge']} ({c['rubric']} on {c['dataset']})",
    same=("dataset_id", "rubric_id"),
    no_partner=lambda c: f"No other run of rubric {c['rubric']} on dataset {c['dataset']} to compare with.",
)
if pair is None:
    st.stop()
ca, cb = pair
a, b = ca["name"], cb["name"]

st.subheader("Reference")
with session() as s:
    annotators = store.annotators_for_dataset(s, ca["dataset_id"])
others = [c["name"] for c in candidates if c["dataset_id"] == ca["dataset_id"] and c["name"] not in (a, b)]
kinds = ["none"] + (["annotator", "human consensus"] if annotators else []) + (["run"] if others else [])
ref_kind = st.radio(
    "Reference for mean |Δ|",
    kinds,
    key="ab_ref_kind",
    horizontal=True,
    index=kinds.index("annotator") if "annotator" in kinds else 0,
)
ref_name = None
if ref_kind == "annotator":
    ref_name = st.selectbox(
        "Annotator",
        annotators,
        key="ab_ref_annotator",
        index=annotators.index(REFERENCE_ANNOTATOR) if REFERENCE_ANNOTATOR in annotators else 0,
    )
elif ref_kind == "run":
    ref_name = st.selectbox("Reference run (e.g. a stronger judge)", others, key="ab_ref_run")

try:
    with session() as s:
        A, B = scale.load_verdicts(s, a), scale.load_verdicts(s, b)
        ref = scale.reference_source(
            s,
            A,
            run=ref_name if ref_kind == "run" else None,
            human=ref_kind == "human consensus",
            annotator=ref_name if ref_kind == "annotator" else None,
        )
        crit_runs = [critique.latest_critique(s, name) for name in (a, b)]
        crit_info = [(r.name, r.status) if r is not None else None for r in crit_runs]
        crit = None
        if all(r is not None for r in crit_runs):
            crit = tuple(critique.critique_rates(s, r) for r in crit_runs)
        rep = scale.ab_report(s, A, B, ref, crit, n_boot=1000)  # type: ignore[arg-type]
except (ValueError, store.NotFound) as e:
    st.error(ui.md(str(e)))
    st.stop()

for w in rep.warnings:
    st.warning(ui.md(w))
st.caption(ui.md(
    f"A = {A.key} (prompt {A.variant}); B = {B.key} (prompt {B.variant}); "
    f"judge {A.judge}; reference {rep.reference or 'none'}; n = {rep.n} answers judged by both."
))
with st.expander("The prompts of A and B"):
    for side, v in (("A", A), ("B", B)):
        source = v.harness.get("prompt_template") or ""
        st.markdown(f"**{side}**: {ui.md(v.variant)}")
        st.code(source or "judgekit's built-in prompt", language="jinja2" if source else None)
with session() as s:
    a_kind = s.get(store.Judge, A.judge_id).kind
rejudge_form(a, a_kind)


ci = ui_bundles.rate_ci

st.subheader("Rationale quality")
if rep.critique:
    qa, qb = rep.critique
    st.caption(ui.md(
        f"Critique runs: A {qa.critique}, B {qb.critique} ({qa.judge}); one check per call; checks "
        "that do not apply are not asked, so each check has its own n."
    ))
    ui_bundles.critique_table(qa, qb, "ab_quality")
else:
    missing = [n for n, info in zip((a, b), crit_info, strict=True) if info is None]
    st.info(ui.md(f"No critique run yet for {', '.join(missing)}: start one below."), icon=":material/lightbulb:")

st.subheader("Scores")
rows = []
for d in [*rep.dimensions.values(), rep.overall]:
    rows.append(
        {
            "dimension": d.key + (" (K.O.)" if rep.ko and d.key == rep.ko.rule.criterion else ""),
            "n": d.shift.examples,
            "shift B − A": d.shift.value,
            "shift 95% CI": ci(d.shift.lo, d.shift.hi),
            "mean|Δ| A": d.mad_a.value,
            "mean|Δ| B": d.mad_b.value,
            "Δ mean|Δ| (B − A)": d.mad_diff.value,
            "Δ 95% CI": ci(d.mad_diff.lo, d.mad_diff.hi),
            "n ref": d.mad_a.n,
            "words A": d.words_a.value,
            "words B": d.words_b.value,
        }
    )
st.dataframe(pd.DataFrame(rows).round(3), hide_index=True, key="ab_scores")

if rep.ko:
    k = rep.ko
    st.subheader(f"K.O.: {k.rule.criterion} ≤ {k.rule.floor} disqualifies")
    m = st.columns(4)
    m[0].metric("Disqualified A", f"{k.disqualified[0].k}/{k.disqualified[0].n}")
    m[1].metric("Disqualified B", f"{k.disqualified[1].k}/{k.disqualified[1].n}")
    m[2].metric(
        "Concordance A↔B",
        f"{k.concordance.rate:.0%}" if k.concordance.n else "–",
        help=f"95% CI {ci(k.concordance.lo, k.concordance.hi, True)}, n = {k.concordance.n}",
    )
    if k.reference_agreement:
        ra, rb = k.reference_agreement
        m[3].metric(
            "Agree with reference A / B",
            f"{ra.rate:.0%} / {rb.rate:.0%}" if ra.n and rb.n else "–",
            help=f"n = {ra.n}",
        )
    for tab, r in zip(st.tabs([ui.md(f"A: {a}"), ui.md(f"B: {b}")]), k.reconciliation, strict=True):
        with tab:
            st.caption(
                f"{len(r.contradictions)} contradictory verdicts of {r.flagged} answers whose red flags or "
                f"rationales name a safety-relevant problem; {r.format_only_flags} format-only red flags "
                "set aside (they never force the K.O.)."
            )
            st.markdown("**Contradictory verdicts** (safety problem named, K.O. dimension above the floor)")
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "example": c["example_id"],
                            k.rule.criterion: c["ko_score"],
                            "named in": "; ".join(f"{x['dimension']} {x['where']}" for x in c["signals"]),
                            "text": " | ".join(x["text"] or "" for x in c["signals"]),
                            f"{k.rule.criterion} rationale": c["ko_rationale"] or "",
                        }
                        for c in r.contradictions
                    ],
                    columns=[
                        "example",
                        k.rule.criterion,
                        "named in",
                        "text",
                        f"{k.rule.criterion} rationale",
                    ],
                ),
                hide_index=True,
                key=f"ab_contra_{r.run}",
            )
            st.markdown("**Disqualified answers**")
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "example": d["example_id"],
                            k.rule.criterion: d["score"],
                            "rationale": d["rationale"] or "",
                            "red flags": "; ".join(d["red_flags"]),
                        }
                        for d in r.disqualified_rows
                    ],
                    columns=["example", k.rule.criterion, "rationale", "red flags"],
                ),
                hide_index=True,
                key=f"ab_dq_{r.run}",
            )

st.subheader("Cost")
st.dataframe(
    pd.DataFrame(
        [
            {
                "run": v.key,
                "calls": c.calls,
                "prompt tokens": c.prompt_tokens,
                "completion tokens": c.completion_tokens,
                "cached tokens": c.cached_tokens,
                "usd": c.usd,
            }
            for v, c in zip((A, B), rep.cost, strict=True)
        ]
    ),
    hide_index=True,
    key="ab_cost",
)

ui_bundles.critique_controls(who, [a, b])
