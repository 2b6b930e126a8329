"""Workspace: what is in the database — datasets, rubrics, runs — and loading the demo."""

import pandas as pd
import streamlit as st

from judgekit import imports, store
from judgekit.webapp import empty_state, session

st.title("Workspace")

with session() as s:
    datasets = store.list_datasets(s)
    rubrics = store.list_rubrics(s)
    runs = store.list_runs(s)

if not datasets:
    empty_state("No datasets yet. Load the demo workspace below, or import your own outputs with "
                "`judgekit import-dataset PATH --name NAME`.")
    if st.button("Load the demo workspace", key="ws_load_demo", type="primary"):
        with st.spinner("Generating 600 demo support answers…"), session() as s:
            imports.load_demo(s)
        st.rerun()
else:
    st.subheader("Datasets")
    st.dataframe(pd.DataFrame(datasets)[["name", "examples", "created_at"]], hide_index=True, key="ws_datasets")

st.subheader("Rubrics")
if rubrics:
    frame = pd.DataFrame(rubrics)
    frame["criteria"] = frame["criteria"].map(", ".join)
    frame["kinds"] = frame["kinds"].map(", ".join)
    st.dataframe(frame[["name", "criteria", "kinds", "ko_rule"]], hide_index=True, key="ws_rubrics")
else:
    empty_state("No rubrics yet: `judgekit import-rubric rubric.yaml`, or load the demo.")

st.subheader("Runs")
if runs:
    st.dataframe(pd.DataFrame(runs)[["id", "name", "status", "harness", "judge", "examples", "scored", "verdicts",
                                     "calls", "tokens", "wall_s"]], hide_index=True, key="ws_runs")
else:
    empty_state("No runs yet: start one with `judgekit run …`.")
