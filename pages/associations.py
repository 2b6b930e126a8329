"""Associations: phi between every criterion pair under each source, side by side with the human column on
one colour scale, with the association audit's verdicts drawn on the cells; the difference from the human
column; and the audit table. A cell or an audit row opens the pair in Cross-tabs or its answers in Examples."""

import streamlit as st

from judgekit import reports, signin, ui

signin.page(
    "Associations",
    "phi is the correlation of two pass/fail columns: near 0 they move independently, near 1 together. "
    "An association the human column does not show is one the judge's call structure invented.",
)

ws = ui.page_workspace("as")
options = ws.source_keys()
if not options:
    st.stop()

default = (["human"] if ws.has_labels else []) + [r.key for r in ws.runs][-4:]
chosen = ui.pick_many("Sources", options, key="as_sources", default=default or options[:1], param="sources",
                      format_func=ws.label)
if not chosen:
    st.info("Choose at least one source.", icon=":material/info:")
    st.stop()
c1, c2, c3 = st.columns([2, 3, 2], vertical_alignment="bottom")
with c1:
    labelled = ui.labelled_toggle(ws, key="as_labelled", default=bool(ui.human_keys(chosen)))
with c2:
    diff = ui.flag("Difference from the human column", key="as_diff", default=False, param="diff",
                   disabled=not ui.human_keys(chosen),
                   help="Each run's matrix shows phi(run) − phi(human column); the human column stays as it is.")
with c3:
    n_boot = ui.pick("Posterior draws (95% intervals)", [200, 1000, 5000], key="as_n_boot", default=1000,
                     widget=st.segmented_control)
view = ui.phi(ws, chosen, n_boot=n_boot or 1000, labelled_only=labelled)
report, keys = view.report, view.report.criteria
names = [ws.name(k).removeprefix("run ") for k in chosen]

st.subheader("phi per source")
panels = ui.phi_panels(report, chosen, names, view.notes, diff_from_human=diff and report.human is not None)
marks = ui.verdict_marks(report.audit, panels, report.human)
fig = ui.matrix_figure(panels, keys, marks=marks, colorbar="phi" if not diff else "phi / Δphi", clickable=True)
event = st.plotly_chart(fig, key="as_matrices", width="stretch", on_select="rerun", selection_mode="points",
                        config={"displayModeBar": False})
clicked = [p for p in (event.selection.points if event else []) if p.get("customdata")]
if clicked:
    source_key, row_key, col_key = clicked[0]["customdata"][:3]
    ui.open_page("pages/crosstabs.py", dataset=ws.dataset, source=source_key, row=row_key, col=col_key)
st.caption(
    ui.md(
        "Click a cell to open that pair in Cross-tabs. Each cell is one criterion pair (the matrices are "
        "symmetric, so only the lower triangle is drawn); hover for phi, its 95% interval and n. "
        + ("Only the answers the humans labelled are counted. " if labelled else "Every answer each source scored "
           "is counted: a run over all answers beside the humans over the labelled ones is not a fair "
           "comparison (switch on 'Only the labelled answers'). ")
    )
)
for key, column in zip(chosen, report.columns, strict=True):
    ui.caption(ws, key, column.n)
for notes in view.notes:
    for sentence in notes.values():
        st.warning(ui.md(sentence), icon=":material/info:")

st.subheader("Association audit")
if report.human is None:
    ui.no_labels()
    st.caption("Without the human column every verdict is 'no human column': add it to the sources above.")
report_names = {column.source: ws.name(key) for key, column in zip(chosen, report.columns, strict=True)}
if report.audit:
    st.markdown(ui.md(ui.audit_summary(report, report_names)))
picked = st.dataframe(ui.audit_frame(report, report_names), hide_index=True, key="as_audit", width="stretch",
                      on_select="rerun", selection_mode="single-row")
if report.audit:
    with st.expander("The evidence in words, pair by pair", expanded=len(report.audit) <= 15):
        for sentence in ui.audit_sentences(report, report_names):
            st.markdown(sentence)
reference = report_names.get(report.reference, report.reference) if report.reference else "none"
st.caption(
    ui.md(
        f"phi [95% interval] per source; human column: {ws.judge('human') if report.human else 'none'}; "
        f"reference harness (the least-conditioned run): {reference}. Select a row to open the pair. "
        "The audit counts every answer each run scored, whatever 'Only the labelled answers' says (the "
        "humans' phi is weighted up to all answers through the reference run's cells). "
        + reports.VERDICT_LEGEND
        + " Evidence: each harness's phi minus the reference's on the same answers, and minus the humans' "
        "(weighted so each of the reference's cells counts by its size). "
        + reports.INTERVAL_NOTE
        + "; "
        + reports.FDR_NOTE
        + ". The judge's noise floor: "
        + (f"from {report.noise_floor}; a shift within a pair's floor (what re-running one harness moves it) "
           "blames no harness." if report.noise_floor else
           "unknown (no repeat runs: `judgekit run … --repeat 2`), so every shown shift counts.")
    )
)
rows = picked.selection.rows if picked else []
pairs = [f"{a.a} × {a.b}" for a in report.audit]
if rows and st.session_state.get("as_pair_row") != pairs[rows[0]]:  # a newly selected row sets the pair
    st.session_state["as_pair"] = st.session_state["as_pair_row"] = pairs[rows[0]]
if pairs:
    p1, p2, p3, p4 = st.columns([3, 3, 2, 2], vertical_alignment="bottom")
    with p1:
        pair = ui.pick("Pair", pairs, key="as_pair")
    with p2:
        via = ui.pick("Under source", chosen, key="as_pair_source", format_func=ws.label)
    row_key, col_key = pair.split(" × ")
    with p3:
        if st.button("Open in Cross-tabs", key="as_open_crosstab", icon=":material/grid_on:"):
            ui.open_page("pages/crosstabs.py", dataset=ws.dataset, source=via, row=row_key, col=col_key)
    with p4:
        if st.button("Read the answers", key="as_open_examples", icon=":material/table_rows:"):
            ui.open_page("pages/examples.py", dataset=ws.dataset, sources=chosen, criteria=[row_key, col_key],
                         labelled=str(labelled))

st.subheader("Difference between two sources")
if len(chosen) < 2:
    st.info("Choose two sources above to see where their phi differ.", icon=":material/info:")
else:
    d1, d2 = st.columns(2)
    with d1:
        a = ui.pick("Source A", chosen, key="as_diff_a", default=chosen[0], format_func=ws.label)
    with d2:
        b = ui.pick("Source B", chosen, key="as_diff_b", default=chosen[1], format_func=ws.label)
    if a == b:
        st.info("Choose two different sources.", icon=":material/info:")
    else:
        ca, cb = report.columns[chosen.index(a)], report.columns[chosen.index(b)]
        fig = ui.diff_heatmap(ca, cb, keys, f"phi({ws.name(a)}) − phi({ws.name(b)})")
        st.plotly_chart(fig, key="as_diff_chart", width="stretch", config={"displayModeBar": False})
        st.caption(
            ui.md(
                f"A: {ws.judge(a)}, n = {ca.n:,} · B: {ws.judge(b)}, n = {cb.n:,}. "
                "n/a where either phi is undefined (see the notes above)."
            )
        )

st.divider()
ui.download_report(
    ws, [ws.run(k).name for k in chosen if k.startswith("run:")], key="as_download", human="human" in chosen
)
