"""Workspace: what is in the database — datasets, rubrics, runs — loading the demo, deleting a run."""

import pandas as pd
import streamlit as st

from judgekit import imports, store, ui
from judgekit.webapp import empty_state, session

st.title("Workspace")

datasets, rubrics, runs = ui.workspace_listing()

st.subheader("Datasets")
if datasets:
    st.dataframe(
        pd.DataFrame(datasets)[["name", "examples", "created_at"]], hide_index=True, key="ws_datasets"
    )
else:
    empty_state(
        "No datasets yet. Load the demo workspace — 600 generated support answers with planted "
        "properties, two rubrics and the planted truth as labels — or upload your own on the Data page "
        "(`judgekit import-dataset PATH --name NAME` on the command line)."
    )
if not any(d["name"] == "demo" for d in datasets) and st.button(
    "Load the demo workspace", key="ws_load_demo", type="primary"
):
    with st.spinner("Generating 600 demo support answers…"), session() as s:
        imports.load_demo(s)
    st.rerun()

st.subheader("Rubrics")
if rubrics:
    frame = pd.DataFrame(rubrics)
    frame["criteria"] = frame["criteria"].map(", ".join)
    frame["kinds"] = frame["kinds"].map(", ".join)
    st.dataframe(frame[["name", "criteria", "kinds", "ko_rule"]], hide_index=True, key="ws_rubrics")
else:
    empty_state("No rubrics yet: upload one on the Data page, or load the demo.")

st.subheader("Runs")
if not runs:
    empty_state(
        "No runs yet: start a single/split pair on the Run page (the simulated judge needs no setup)."
    )
    st.stop()

frame = pd.DataFrame(runs)
st.dataframe(
    frame[
        [
            "id",
            "name",
            "status",
            "progress",
            "harness",
            "judge",
            "dataset",
            "rubric",
            "examples",
            "scored",
            "verdicts",
            "calls",
            "tokens",
            "usd",
            "wall_s",
        ]
    ],
    hide_index=True,
    key="ws_runs",
    column_config={
        "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0),
        "usd": st.column_config.NumberColumn("cost (USD)", format="%.4f"),
        "wall_s": st.column_config.NumberColumn("wall time (s)", format="%.1f"),
    },
)
if any(r["judge_kind"] == "simulated" for r in runs):
    st.caption(
        "Runs on the *simulated* judge follow a stated statistical model — they test the pipeline, "
        "not a real judge."
    )

with st.expander("Delete a run"):
    doomed = st.selectbox("Run", [r["name"] for r in runs], key="ws_delete_run")
    confirm = st.checkbox(
        f"Yes, delete run {doomed!r} with all its calls and verdicts", key="ws_delete_confirm"
    )
    if st.button("Delete", key="ws_delete", disabled=not confirm):
        with session() as s:
            store.delete_run(s, store.get_run(s, doomed))
        st.session_state.pop("ws_delete_confirm", None)
        st.rerun()
