"""Associations: phi between every criterion pair under each source, side by side with the human column;
the difference between two sources; and the audit that says which associations are real and which a
harness induced. Any pair opens in Cross-tabs."""

import streamlit as st

from judgekit import ui

st.title("Associations")
st.caption(
    "phi is the correlation of two pass/fail columns: near 0 they move independently, near 1 together. "
    "An association the human column does not show is one the judge's call structure invented."
)

ws = ui.page_workspace("as")
options = ws.source_keys()
if not options:
    st.stop()

default = [r.key for r in ws.runs][:4] + (["human"] if ws.has_labels else [])
if "as_sources" in st.session_state:
    st.session_state["as_sources"] = [k for k in st.session_state["as_sources"] if k in options]
else:
    st.session_state["as_sources"] = default or options[:1]
chosen = st.multiselect("Sources", options, key="as_sources", format_func=ws.label)
if not chosen:
    st.info("Choose at least one source.", icon=":material/info:")
    st.stop()
n_boot = ui.pick(
    "Bootstrap replicates (95% CIs)",
    [200, 1000, 5000],
    key="as_n_boot",
    default=1000,
    widget=st.segmented_control,
)
view = ui.phi(ws, chosen, n_boot=n_boot or 1000)
report, keys = view.report, view.report.criteria

st.subheader("phi per source")
per_row = 3
for start in range(0, len(chosen), per_row):
    cols = st.columns(per_row)
    for i, (key, notes, column) in enumerate(
        zip(
            chosen[start : start + per_row],
            view.notes[start : start + per_row],
            report.columns[start : start + per_row],
            strict=True,
        )
    ):
        with cols[i]:
            name = ws.name(key)
            fig = ui.phi_heatmap(column, keys, f"{name} — n = {column.n}", notes)
            st.plotly_chart(fig, key=f"as_heat_{start + i}", width="stretch")
            ui.caption(ws, key, column.n)
            for sentence in notes.values():
                st.warning(ui.md(sentence), icon=":material/info:")

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
        st.plotly_chart(fig, key="as_diff", width="stretch")
        st.caption(
            ui.md(
                f"A: {ws.judge(a)}, n = {ca.n} · B: {ws.judge(b)}, n = {cb.n}. "
                "n/a where either phi is undefined (see the notes above)."
            )
        )

st.subheader("Association audit")
if report.human is None:
    ui.no_labels()
    st.caption("Without the human column every verdict is 'no human column': add it to the sources above.")
names = {column.source: ws.name(key) for key, column in zip(chosen, report.columns, strict=True)}
st.dataframe(ui.audit_frame(report, names), hide_index=True, key="as_audit", width="stretch")
st.caption(
    ui.md(
        f"phi [95% bootstrap CI, {report.n_boot} replicates] per source; human column: "
        f"{ws.judge('human') if report.human else 'none'}. real: the human CI excludes 0; induced: "
        "the humans admit 0 and a harness lies outside their CI while another lies inside."
    )
)

st.subheader("Open a pair in Cross-tabs")
pairs = [f"{a.a} × {a.b}" for a in report.audit]
if pairs:
    p1, p2, p3 = st.columns([2, 2, 1], vertical_alignment="bottom")
    with p1:
        pair = ui.pick("Pair", pairs, key="as_pair")
    with p2:
        via = ui.pick("Under source", chosen, key="as_pair_source", format_func=ws.label)
    with p3:
        if st.button("Open cross-tab", key="as_open_crosstab", icon=":material/grid_on:"):
            row_key, col_key = pair.split(" × ")
            ui.open_crosstab(ws.dataset_id, via, row_key, col_key)

st.divider()
ui.download_report(
    ws, [ws.run(k).name for k in chosen if k.startswith("run:")], key="as_download", human="human" in chosen
)
