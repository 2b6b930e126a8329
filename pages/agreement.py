"""Agreement: how far each judge is from the humans (κ with CI, TPR/TNR, AUC; for scale criteria mean |Δ|,
weighted κ, Spearman), how far two judges are from each other, and how far the annotators are from each
other (κ per pair, Krippendorff's α)."""

import streamlit as st

from judgekit import ui

st.title("Agreement")
st.caption(
    "Fail is the positive class: TPR is the share of human failures the judge also fails, TNR the share "
    "of human passes it also passes."
)

ws = ui.page_workspace("ag")


run_keys = [r.key for r in ws.runs]

st.subheader("Judge vs human")
if run_keys and ws.has_labels:
    h1, h2 = st.columns(2)
    with h1:
        judge = ui.pick("Judge (run)", run_keys, key="ag_run", format_func=ws.label)
    with h2:
        humans = ws.source_keys(runs=False)
        ref = ui.pick("Human column", humans, key="ag_human", default="human", format_func=ws.label)
    rep = ui.agreement(ws, judge, ref)
    st.caption(
        ui.md(
            f"judge: {ws.name(judge)} — {ws.judge(judge)}; human: {ws.judge(ref)}; "
            f"n = {max((e['n'] for e in rep.criteria.values()), default=0)} examples scored by both"
        )
    )
    if rep.message:
        st.warning(ui.md(rep.message))
    st.dataframe(ui.agreement_frame(rep), hide_index=True, key="ag_table", width="stretch")
    st.plotly_chart(ui.kappa_figure(rep, "κ with 95% CI per criterion"), key="ag_kappa", width="stretch")

st.subheader("Judge vs judge")
if len(run_keys) < 2:
    st.info(
        "Needs two runs of this dataset: start another on the Run page or with `judgekit run …`.",
        icon=":material/lightbulb:",
    )
else:
    j1, j2 = st.columns(2)
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
    if a == b:
        st.info("Choose two different runs.", icon=":material/info:")
    else:
        jj = ui.agreement(ws, b, a)
        st.caption(
            ui.md(
                f"{ws.name(b)} ({ws.judge(b)}) against {ws.name(a)} ({ws.judge(a)}) as the reference; "
                f"n = {max((e['n'] for e in jj.criteria.values()), default=0)} examples both scored"
            )
        )
        if jj.message:
            st.warning(ui.md(jj.message))
        st.dataframe(ui.agreement_frame(jj), hide_index=True, key="ag_jj_table", width="stretch")

st.subheader("Annotator vs annotator")
include_ref = st.checkbox("Include the demo's planted truth (annotator reference)", key="ag_include_reference")
aa = ui.annotator_agreement(ws, include_reference=include_ref)
if aa is None:
    who = [a for a in ws.annotators if include_ref or a != "reference"]
    st.info(
        f"Needs two annotators on this dataset (now: {ui.md(', '.join(who)) or 'none'}): label with a "
        "second annotator on the Label page or import labels with "
        "`judgekit import-labels PATH --dataset NAME --annotator NAME`.",
        icon=":material/lightbulb:",
    )
else:
    st.caption(ui.md(f"annotators: {', '.join(aa.annotators)}; α is nominal for binary and ordinal for scale criteria"))
    alpha, pairs = ui.annotator_frames(aa)
    st.dataframe(alpha, hide_index=True, key="ag_alpha", width="stretch")
    st.dataframe(pairs, hide_index=True, key="ag_pairs", width="stretch")
