"""Cross-tabs: one source and a criterion pair → the 2×2 table, its row-conditioned failure rates, the ratio
and phi; pick a cell to read its examples with every source's verdicts and rationales (or open them in
Examples). The source, pair and cell live in the URL, so Associations can open a pair here."""

import streamlit as st

from judgekit import reports, signin, ui

signin.page(
    "Cross-tabs",
    "Rows: the row criterion's pass/fail; columns: the column criterion's. Each failure rate divides a "
    "cell by its own row total, so the two rows are comparable.",
)

ws = ui.workspace("ct")
if ws is None:
    st.stop()
keys = ws.source_keys()
if not ws.runs:
    ui.no_runs()
if not ws.has_labels:
    ui.no_labels()
if not keys:
    st.stop()

s1, s2 = st.columns([3, 1], vertical_alignment="bottom")
with s1:
    key = ui.pick("Source", keys, key="ct_source", format_func=ws.label, param="source")
with s2:
    labelled = ui.labelled_toggle(ws, key="ct_labelled", default=not key.startswith("run:"))
src = ui.source(ws, key, labelled_only=labelled)
criteria = [k for k in src.keys if k in src.judged] or src.keys
if len(criteria) < 2:
    st.warning(ui.md(f"{ws.name(key)} has fewer than two judged criteria: there is no pair to cross-tabulate."))
    st.stop()

left, right = st.columns(2)
with left:
    default_row = "cites_source" if "cites_source" in criteria else criteria[1]
    row = ui.pick("Row criterion", criteria, key="ct_row", default=default_row, param="row")
with right:
    others = [k for k in criteria if k != row]
    col = ui.pick(
        "Column criterion",
        criteria,
        key="ct_col",
        default="answers_question" if "answers_question" in others else others[0],
        param="col",
    )
if row == col:
    st.warning("Choose two different criteria.")
    st.stop()

ct = reports.crosstab_report(src, row, col)
t = ct.table
st.subheader(f"{row} × {col}")
ui.caption(ws, key, t.n, "only the labelled answers · " if labelled else "")
st.dataframe(ui.crosstab_table(ct), key="ct_table")
st.markdown(ui.md(ui.crosstab_sentence(ct)))

m1, m2, m3 = st.columns(3)
m1.metric("n (both scored)", f"{t.n:,}")
m2.metric(f"ratio of {col} failure rates", ui.fmt(t.ratio, ".2f", "undefined"))
m3.metric("phi", ui.fmt(t.phi, ".3f", "undefined"))
explain = ui.undefined_phi(src, ws.name(key))
if t.n == 0:
    st.warning(ui.md(f"No example has both {row} and {col} scored under {ws.name(key)}: nothing to cross-tabulate."))
else:
    for k in (row, col):
        if k in explain:
            st.warning(ui.md(explain[k]), icon=":material/info:")
    st.caption(ui.md(ui.ratio_sentence(ct)))
with st.expander("As plain text"):
    st.code(reports.render_crosstab_table(ct), language=None)

st.subheader("Examples in a cell")
cells = [f"{r}|{c}" for r in reports.OUTCOMES for c in reports.OUTCOMES]
counts = {f"{r}|{c}": len(ct.cells[r][c]) for r in reports.OUTCOMES for c in reports.OUTCOMES}
off_diagonal = [c for c in ("fail|pass", "pass|fail") if counts[c]]
cell = ui.pick(
    "Cell",
    cells,
    key="ct_cell",
    default=off_diagonal[0] if off_diagonal else cells[0],
    widget=st.radio,
    horizontal=True,
    format_func=lambda c: f"{row} {c.split('|')[0]} · {col} {c.split('|')[1]} ({counts[c]:,})",
    param="cell",
)
r_out, c_out = cell.split("|")
ids = ct.cells[r_out][c_out]
if not ids:
    st.info("No example in this cell.", icon=":material/info:")
    st.stop()
ui.examples_list(
    ws, ids, prefix="ct", table_key="ct_examples", caption=f"{len(ids):,} examples",
    examples_link={"criteria": [row, col], "cell_source": key, "cell": f"{row}={r_out}|{col}={c_out}",
                   "labelled": str(labelled)},
    link_help="Every run's verdicts on these answers side by side, with filters and search.",
)
