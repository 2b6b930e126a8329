"""Prompt A/B: seed 002's A/B re-judge — one judge, two prompt variants, the same answers — with n and CIs,
the K.O. views (disqualified answers, contradictory verdicts) and the rationale critique of both runs."""

import math

import pandas as pd
import streamlit as st

from judgekit import critique, jobs, prompt_templates, runner, scale, store, ui
from judgekit.webapp import db_url, empty_state, session, sim_judge_base_url

st.title("Prompt A/B")
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
    with st.expander(f"Re-judge {base} with another prompt (starts a run B over the same answers)"):
        text = st.text_area(
            "Prompt template (Jinja2: {{ question }}, {{ context }}, {{ answer }}, {{ criteria }} last)",
            value=EXAMPLE_TEMPLATE, height=200, key="ab_template",
        )
        few = st.number_input("Few-shot: labelled examples per criterion", 0, 20, 0, key="ab_few_shot")
        try:
            compiled = prompt_templates.compile_template(text, "page template")
        except ValueError as e:
            st.error(str(e), icon=":material/error:")
            return
        st.caption(f"Valid: {compiled.label}.")
        if st.button("Start run B", key="ab_rejudge"):
            try:
                with session() as s:
                    new = runner.create_rerun(
                        s, base, prompt_template=text, prompt_template_name="page template", few_shot=int(few),
                        few_shot_from="human" if few else "",
                        base_url=sim_judge_base_url() if kind == "simulated" else None,
                    )
                    name = new.name
            except (ValueError, store.NotFound) as e:
                st.error(str(e))
            else:
                jobs.start(db_url(), name)
                st.success(f"Started {name}: when it has finished, choose it as run B.")


with session() as s:
    candidates = scale.ab_candidates(s)
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

by_name = {c["name"]: c for c in candidates}


def label(name: str) -> str:
    c = by_name[name]
    return f"{name} — {c['variant']} — {c['judge']} ({c['rubric']} on {c['dataset']})"


c1, c2 = st.columns(2)
a = c1.selectbox("Run A", list(by_name), key="ab_a", format_func=label)
ca = by_name[a]
same = [
    c
    for c in candidates
    if c["name"] != a and c["dataset_id"] == ca["dataset_id"] and c["rubric_id"] == ca["rubric_id"]
]
if not same:
    st.info(
        f"No other run of rubric {ca['rubric']} on dataset {ca['dataset']} to compare with.",
        icon=":material/info:",
    )
    st.stop()
same.sort(key=lambda c: (c["judge_id"] != ca["judge_id"], c["variant"] == ca["variant"]))
b = c2.selectbox("Run B", [c["name"] for c in same], key="ab_b", format_func=label)
cb = by_name[b]

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
        index=annotators.index("reference") if "reference" in annotators else 0,
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
    st.error(str(e))
    st.stop()

for w in rep.warnings:
    st.warning(w)
st.caption(
    f"A = {A.key} (prompt {A.variant}); B = {B.key} (prompt {B.variant}); "
    f"judge {A.judge}; reference {rep.reference or 'none'}; n = {rep.n} answers judged by both."
)
with st.expander("The prompts of A and B"):
    for side, v in (("A", A), ("B", B)):
        source = v.harness.get("prompt_template") or ""
        st.markdown(f"**{side}**: {ui.md(v.variant)}")
        st.code(source or "judgekit's built-in prompt", language="jinja2" if source else None)
with session() as s:
    a_kind = s.get(store.Judge, A.judge_id).kind
rejudge_form(a, a_kind)


def ci(lo: float, hi: float, pct: bool = False) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "–"
    return f"[{lo:.0%}, {hi:.0%}]" if pct else f"[{lo:+.2f}, {hi:+.2f}]"


st.subheader("Rationale quality")
if rep.critique:
    qa, qb = rep.critique
    rows = []
    for check in dict.fromkeys([*qa.checks, *qb.checks]):
        ra, rb = qa.checks.get(check), qb.checks.get(check)
        rows.append(
            {
                "check": check,
                "A rate": ra.rate if ra else math.nan,
                "A 95% CI": ci(ra.lo, ra.hi, True) if ra else "–",
                "A n": ra.n if ra else 0,
                "B rate": rb.rate if rb else math.nan,
                "B 95% CI": ci(rb.lo, rb.hi, True) if rb else "–",
                "B n": rb.n if rb else 0,
            }
        )
    st.caption(
        f"Critique runs: A {qa.critique}, B {qb.critique} ({qa.judge}); one check per call; checks "
        "that do not apply are not asked, so each check has its own n."
    )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        key="ab_quality",
        column_config={
            "A rate": st.column_config.NumberColumn(format="percent"),
            "B rate": st.column_config.NumberColumn(format="percent"),
        },
    )
else:
    missing = [n for n, info in zip((a, b), crit_info, strict=True) if info is None]
    st.info(f"No critique run yet for {', '.join(missing)}: start one below.", icon=":material/lightbulb:")

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
    for tab, r in zip(st.tabs([f"A: {a}", f"B: {b}"]), k.reconciliation, strict=True):
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

st.subheader("Critique both runs")
st.caption(
    "A critic judges every stored rationale of A and of B against cites_evidence, justifies_level, "
    "names_fix, catches_safety and dimension_locus — one check per call — and stores it as a run."
)
critic = st.radio(
    "Critic", ["Simulated judge", "OpenAI-compatible endpoint"], key="ab_critic", horizontal=True
)
api_key_env = None
if critic == "Simulated judge":
    st.caption(
        "**Simulated** — reads the markers the simulated judge planted in its rationales; it measures "
        "nothing about a real judge's rationales."
    )
    kind, model, base_url = "simulated", "judgekit-sim", None
else:
    kind = "openai"
    base_url, model, api_key_env = ui.endpoint_inputs("ab")
concurrency = st.number_input("Concurrency", min_value=1, max_value=64, value=8, key="ab_concurrency")
if st.button("Critique both runs", type="primary", key="ab_critique"):
    judge = runner.JudgeSpec(
        base_url=base_url or sim_judge_base_url(),
        model=model,
        kind=kind,
        api_key_env=api_key_env or None,
        max_tokens=512,
    )
    try:
        with session() as s:
            names = [critique.create_critique_run(s, target=name, judge=judge).name for name in (a, b)]
    except (ValueError, store.NotFound) as e:
        st.error(str(e))
    else:
        for name in names:
            jobs.start(db_url(), name, concurrency=int(concurrency))
        st.success(f"Started {', '.join(names)}.")
        crit_info = [(n, "running") for n in names]

for info in crit_info:
    if info is None:
        continue
    job = jobs.get(db_url(), info[0])
    if job is not None and job.alive:
        p = job.progress
        frac = p.fraction if p else 0.0
        st.progress(frac, text=f"{info[0]}: {p.done_calls if p else 0}/{p.total_calls if p else '?'} calls")
    elif job is not None and job.error:
        st.error(f"{info[0]}: {job.error}")
    else:
        st.caption(f"{info[0]}: {info[1]}")
if any(info and (j := jobs.get(db_url(), info[0])) is not None and j.alive for info in crit_info):
    st.button("Refresh", key="ab_refresh")
