"""Examples: the examples × runs grid — one row per answer, one column per run (and the human column), the
cells the verdicts of the chosen criteria — with filters (flips only, disagrees with the humans,
unscored), text search and pages; select a row to read the whole answer with every run's rationale.
Every choice lives in the URL, so Compare, Cross-tabs and Associations open it on what they show."""

import streamlit as st

from judgekit import grid, signin, ui
from judgekit.webapp import session

signin.page(
    "Examples",
    "Rows are answers, columns the runs you compare and the human column; a cell is what that source said. "
    "Filter to where the runs flip or disagree with the humans, search the texts, and select a row to read it.",
)

ws = ui.page_workspace("ex")
options = ws.source_keys()
if not ws.runs:
    st.stop()

default = [r.key for r in ws.runs][-4:] + (["human"] if ws.has_labels else [])
keys = ui.pick_many("Columns", options, key="ex_sources", default=default, param="sources", format_func=ws.label)
keys = ui.human_keys(keys) + [k for k in keys if k.startswith("run:")]  # the humans first, as on Associations
if not keys:
    st.info("Choose at least one run.", icon=":material/info:")
    st.stop()
criteria = ui.criteria_of(ws, keys)
c1, c2 = st.columns([3, 2])
with c1:
    chosen = ui.pick_many("Criteria (none chosen: all of them)", criteria, key="ex_criteria", default=[],
                          param="criteria")
with c2:
    text = ui.text("Search ids, questions, contexts and answers", key="ex_search", param="q")
f1, f2 = st.columns([3, 2], vertical_alignment="bottom")
with f1:
    filters = ui.pills("Filters", list(grid.FILTERS), key="ex_filters", param="filter",
                       format_func=grid.FILTERS.__getitem__)
with f2:
    labelled = ui.labelled_toggle(ws, key="ex_labelled", default="human" in keys)

where: tuple = ()
cell_source, cell = st.query_params.get("cell_source"), st.query_params.get("cell")
if cell_source and cell:  # the answers of one cross-tab cell, as opened from Cross-tabs
    try:
        where = tuple((cell_source, crit, 1.0 if outcome == "pass" else 0.0)
                      for crit, outcome in (part.split("=") for part in cell.split("|")))
    except ValueError:
        where = ()
    if where:
        w1, w2 = st.columns([4, 1], vertical_alignment="center")
        w1.info(ui.md(f"Only the answers where {ws.name(cell_source) if cell_source in options else cell_source} "
                      f"says {cell.replace('=', ' ').replace('|', ' and ')} (a cross-tab cell)."),
                icon=":material/filter_alt:")
        if w2.button("Show all answers", key="ex_clear_cell"):
            del st.query_params["cell_source"], st.query_params["cell"]
            st.rerun()
if where and cell_source not in keys:
    keys = [*keys, cell_source] if cell_source in options else keys

query = grid.GridQuery(tuple(chosen), frozenset(filters or ()), text, where, labelled)
page_key = "ex_page"
if st.session_state.get("ex_query") != query:  # a new query starts on its first page
    st.session_state["ex_query"] = query
    st.session_state.pop(page_key, None)
page_no = ui.page_number(key=page_key)
result = ui.grid_page(ws, keys, query, page_no)
for note in result.notes:
    st.warning(ui.md(note), icon=":material/info:")
if len(result.criteria) == 1:
    what = f"cells: {result.criteria[0]}"
else:
    what = "cells: the failing criteria by number — " + " · ".join(f"{i} {k}" for i, k in enumerate(result.criteria, 1))
st.caption(ui.md(f"{result.total:,} answers match · page {result.page + 1:,} of {result.pages:,} · {what}"))
if not result.total:
    st.info("No answer matches: loosen the filters or the search.", icon=":material/info:")
    st.stop()

config, order = ui.grid_columns_config(result.frame)
picked = st.dataframe(ui.grid_style(result.frame), hide_index=True, key="ex_grid", width="stretch",
                      height=35 * (len(result.frame) + 1) + 3, on_select="rerun", selection_mode="single-row",
                      column_config=config, column_order=order)
ui.pager(result.page, result.pages, key=page_key)

rows = picked.selection.rows if picked else []
chosen_id = result.ids[rows[0]] if rows else st.query_params.get("example")
if chosen_id is None:
    st.caption("Select a row to read the whole answer with every run's verdict and rationale.")
    st.stop()
st.query_params["example"] = chosen_id
st.subheader("The whole example")
with session() as s:
    detail = ui.example_detail(s, ws.dataset_id, chosen_id)
ui.render_example(detail, key="ex_detail")
