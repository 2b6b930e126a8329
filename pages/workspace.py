"""Workspace: the first screen — the workspace's findings in sentences, each opening the page that shows it
(or, on an empty workspace, the two steps to get there) — then what is in the database: datasets, rubrics,
runs with cost and progress; loading the demo; deleting a run."""

import pandas as pd
import streamlit as st

from judgekit import bundles, findings, signin, ui, webapp
from judgekit.auth import NEEDS, Action
from judgekit.webapp import empty_state, session

who = signin.page("Workspace")

datasets, rubrics, runs = ui.workspace_listing()


def show(items: list[findings.Finding]) -> None:
    for f in items:
        text, link = st.columns([5, 1], vertical_alignment="center")
        text.markdown(ui.md(f.sentence))
        need = webapp.page_need(f.page)
        if need is None or who.can(need):
            link.page_link(f.page, label=f.link, icon=":material/arrow_forward:", query_params=f.params or None)
        else:  # a page this role cannot open is not linked (st.navigation lists it only as a refusal)
            link.caption(f"{f.link} needs the {NEEDS[need]} role")


if not datasets or not runs:
    st.subheader("Get started")
    show(findings.first_steps(bool(datasets), bool(runs)))
    if not any(d["name"] == "demo" for d in datasets) and who.can(Action.IMPORT) and st.button(
        "Load the demo workspace", key="ws_load_demo", type="primary"
    ):
        from judgekit import actions  # the write path loads when a write happens, not on every first view

        with st.spinner("Generating 600 demo support answers…"), session() as s:
            actions.load_demo(who, s)
        st.rerun()
else:
    ws = ui.workspace("ws")
    if ws is not None and ws.runs:
        st.subheader(f"What dataset {ui.md(ws.dataset)} shows")
        if not ws.has_labels:
            show([findings.no_labels_step()])
        show(ui.story(ws))
        story = ui.story_runs(ws)
        st.caption(
            ui.md(
                f"From the latest runs of rubric {story[-1].rubric}: {', '.join(r.name for r in story)}"
                + ("; agreement counts the answers the humans labelled, the audit every answer each run scored."
                   if ws.has_labels else ".")
            )
        )
        if any(r.judge_kind == "simulated" for r in story):
            st.caption(
                "Runs on the *simulated* judge follow a stated statistical model — they test the pipeline, "
                "not a real judge."
            )

st.subheader("Runs")
if not runs:
    empty_state("No runs yet: start a single/split pair on the Run page (the simulated judge needs no setup).")
else:
    frame = pd.DataFrame(runs)
    st.dataframe(
        frame[["name", "status", "progress", "usd", "wall_s", "calls", "cache_hits", "tokens", "harness", "judge",
               "dataset", "rubric", "examples", "scored", "cannot_assess", "repeat"]],
        hide_index=True,
        key="ws_runs",
        width="stretch",
        column_config={
            "name": st.column_config.TextColumn("run", width=170),
            "status": st.column_config.TextColumn("status", width=80),
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, width=90,
                                                        format="percent"),
            "usd": st.column_config.NumberColumn("cost (USD)", format="$%.4f", width=90),
            "wall_s": st.column_config.NumberColumn("wall time", format="%.2f s", width=90),
            "calls": st.column_config.NumberColumn("calls", format="localized", width=70),
            "cache_hits": st.column_config.NumberColumn(
                "from cache", format="localized", width=80,
                help="Calls answered from the response cache: nothing sent, nothing billed."),
            "tokens": st.column_config.NumberColumn("tokens", format="localized", width=90),
            "examples": st.column_config.NumberColumn("answers", format="localized"),
            "scored": st.column_config.NumberColumn("scored verdicts", format="localized"),
            "cannot_assess": st.column_config.NumberColumn(
                "cannot assess", format="localized", help="Verdicts where the judge said the criterion cannot "
                "be assessed (offered only where the rubric enables it): neither a fail nor unscored."),
        },
    )

st.subheader("Datasets")
if datasets:
    st.dataframe(
        pd.DataFrame(datasets)[["name", "examples", "created_at"]], hide_index=True, key="ws_datasets",
        column_config={"examples": st.column_config.NumberColumn("answers", format="localized")},
    )
else:
    empty_state(
        "No datasets yet. Load the demo workspace — 600 generated support answers with planted "
        "properties, two rubrics and the planted truth as labels — or upload your own on the Data page."
    )

st.subheader("Rubrics")
if rubrics:
    frame = pd.DataFrame(rubrics)
    frame["criteria"] = frame["criteria"].map(", ".join)
    frame["kinds"] = frame["kinds"].map(", ".join)
    st.dataframe(frame[["name", "criteria", "kinds", "ko_rule"]], hide_index=True, key="ws_rubrics")
else:
    empty_state("No rubrics yet: upload one on the Data page, or load the demo.")

with session() as s:
    groups = bundles.groupings(s)
if groups:
    st.subheader("Bundles")
    st.dataframe(pd.DataFrame([{**g, "fields": " + ".join(g["fields"])} for g in groups]), hide_index=True,
                 key="ws_bundles")
    st.caption("Answers grouped by metadata fields for the holistic call (`judgekit bundles`); each "
               "bundle's K.O. rule and holistic scores are on the Prompt A/B page, level *bundles*.")

if runs and who.can(Action.DELETE):
    with st.expander("Delete a run"):
        doomed = st.selectbox("Run", [r["name"] for r in runs], key="ws_delete_run")
        # the confirmation belongs to the run it names: choosing another run asks again
        confirm_key = f"ws_delete_confirm|{doomed}"
        confirm = st.checkbox(ui.md(f"Yes, delete run {doomed} with all its calls and verdicts"), key=confirm_key)

        def delete(name: str, key: str) -> None:
            from judgekit import actions

            try:
                with session() as s:
                    actions.delete_run(signin.identity(), s, name)
            except ValueError as e:
                st.session_state["ws_delete_refused"] = str(e)
                return
            st.session_state.pop(key, None)
            st.session_state.pop("ws_delete_run", None)

        st.button("Delete", key="ws_delete", disabled=not confirm, on_click=delete, args=(doomed, confirm_key))
        if refused := st.session_state.pop("ws_delete_refused", None):
            st.error(ui.md(refused))
