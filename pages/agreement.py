"""Agreement: how far each judge is from the humans (κ with CI, TPR/TNR, AUC; for scale criteria mean |Δ|,
weighted κ, Spearman), how far two judges are from each other, and how far the annotators are from each
other (κ per pair, Krippendorff's α)."""

import streamlit as st

from judgekit import signin, ui, ui_noise
from judgekit.rubric import REFERENCE_ANNOTATOR

signin.page(
    "Agreement",
    "Fail is the positive class: TPR is the share of human failures the judge also fails, TNR the share "
    "of human passes it also passes.",
)

ws = ui.page_workspace("ag")


run_keys = [r.key for r in ws.runs]

st.subheader("Judge vs human")
if run_keys and ws.has_labels:
    h1, h2 = st.columns(2)
    with h1:
        judge = ui.pick("Judge (run)", run_keys, key="ag_run", format_func=ws.label, param="run")
    with h2:
        humans = ws.source_keys(runs=False)
        ref = ui.pick("Human column", humans, key="ag_human", default="human", format_func=ws.label, param="human")
    rep = ui.agreement(ws, judge, ref)
    n = max((e["n"] for e in rep.criteria.values()), default=0)
    st.caption(
        ui.md(f"{ws.name(judge)} — {ui.who(ws, judge)}; against {ws.name(ref)} — {ws.judge(ref)}; "
              f"n = {n:,} answers scored by both (only labelled answers count)")
    )
    if rep.message:
        st.warning(ui.md(rep.message))
    st.dataframe(ui.agreement_frame(rep), hide_index=True, key="ag_table", width="stretch")
    if not any(e["n_auc"] for e in rep.criteria.values()):
        st.caption("AUC needs the judge's P(pass): start a run with “Record P(pass) from log-probabilities”.")
    for sentence in ui.kappa_notes(rep):
        st.warning(ui.md(ui.with_run_names(sentence, {rep.source: ws.name(judge)})), icon=":material/info:")
    if rep.pooled:
        st.markdown(f"**Pooled over criteria** — {rep.pooled['criteria']} criteria with a defined κ, "
                    f"{rep.pooled['n']} examples")
        st.dataframe(ui.pooled_frame(rep), hide_index=True, key="ag_pooled", width="stretch")
        st.caption("95% intervals from one joint posterior over the examples (criteria judged on the same "
                   "examples move together); per-criterion κ intervals: Dirichlet posterior of the 2×2 cells, "
                   "Jeffreys prior; accuracy: Jeffreys interval.")
    st.plotly_chart(ui.kappa_figure(rep, "κ with 95% CI per criterion"), key="ag_kappa", width="stretch")

st.subheader("Judge vs judge")
if len(run_keys) < 2:
    st.info(
        "Needs two runs of this dataset: start another on the Run page or with `judgekit run …`.",
        icon=":material/lightbulb:",
    )
else:
    j1, j2, j3 = st.columns([2, 2, 1.3], vertical_alignment="bottom")
    with j1:
        a = ui.pick("Reference run", run_keys, key="ag_jj_a", default=run_keys[0], format_func=ws.label)
    with j2:
        b = ui.pick(
            "Compared run",
            run_keys,
            key="ag_jj_b",
            default=next(k for k in run_keys if k != a),
            format_func=ws.label,
        )
    with j3:
        labelled = ui.labelled_toggle(ws, key="ag_jj_labelled", default=False)
    if a == b:
        st.info("Choose two different runs.", icon=":material/info:")
    else:
        jj = ui.agreement(ws, b, a, labelled_only=labelled)
        st.caption(
            ui.md(
                f"{ws.name(b)} ({ws.judge(b)}) against {ws.name(a)} ({ws.judge(a)}) as the reference; "
                f"n = {max((e['n'] for e in jj.criteria.values()), default=0):,} answers both scored"
                + (", only the labelled ones" if labelled else "")
            )
        )
        if jj.message:
            st.warning(ui.md(jj.message))
        st.dataframe(ui.agreement_frame(jj), hide_index=True, key="ag_jj_table", width="stretch")
        for sentence in ui.kappa_notes(jj):
            st.warning(ui.md(ui.with_run_names(sentence, {jj.source: ws.name(b), jj.human: ws.name(a)})),
                       icon=":material/info:")
        ui_noise.noise_floor_section(ws, a, b, key="ag_floor")

st.subheader("Annotator vs annotator")
include_ref = st.checkbox("Include the demo's planted truth (annotator reference)", key="ag_include_reference")
aa = ui.annotator_agreement(ws, include_reference=include_ref)
if aa is None:
    who = [a for a in ws.annotators if include_ref or a != REFERENCE_ANNOTATOR]
    st.info(
        f"Needs two annotators on this dataset (now: {ui.md(', '.join(who)) or 'none'}): label with a "
        "second annotator on the Label page or import labels with "
        "`judgekit import-labels PATH --dataset NAME --annotator NAME`.",
        icon=":material/lightbulb:",
    )
else:
    left_out = f"; adjudicators settle and are not counted: {', '.join(aa.adjudicators)}" if aa.adjudicators else ""
    st.caption(ui.md(f"annotators: {', '.join(aa.annotators)}; α is nominal for binary and ordinal for scale "
                     f"criteria, over the examples two or more annotators labelled{left_out}"))
    alpha, pairs = ui.annotator_frames(aa)
    st.dataframe(alpha, hide_index=True, key="ag_alpha", width="stretch")
    st.dataframe(pairs, hide_index=True, key="ag_pairs", width="stretch")

ui_noise.health_section(ws)
