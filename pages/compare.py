"""Compare: two runs over the same examples — which verdicts flipped per criterion (McNemar), where the
failures are filed, all-pass rates, what each cost, and cost against agreement with the humans for every
run of the dataset."""

import streamlit as st

from judgekit import ui
from judgekit.webapp import session

st.title("Compare")
st.caption(
    "Two harnesses over byte-identical stored outputs: a pass rate can stay put while the failures move "
    "to other criteria. Flips are counted on the examples both runs scored."
)

ws = ui.workspace("cmp")
if ws is None:
    st.stop()
if not ws.runs:
    ui.no_runs()
    st.stop()
if len(ws.runs) < 2:
    st.info(
        "Compare needs two runs of this dataset: start another on the Run page or with `judgekit run …` "
        "(for instance the same rubric with `--harness split`).",
        icon=":material/lightbulb:",
    )
    st.stop()

run_keys = [r.key for r in ws.runs]
c1, c2 = st.columns(2)
with c1:
    a = ui.pick("Run A", run_keys, key="cmp_a", default=run_keys[0], format_func=ws.label)
with c2:
    b = ui.pick("Run B", run_keys, key="cmp_b", default=next(k for k in run_keys if k != a), format_func=ws.label)
if a == b:
    st.info("Choose two different runs.", icon=":material/info:")
    st.stop()
ra, rb = ws.run(a), ws.run(b)
cmp = ui.compare(ws, a, b)
st.caption(
    ui.md(
        f"A = {ra.name} — judge: {ra.judge} · {ra.harness}; B = {rb.name} — judge: {rb.judge} · "
        f"{rb.harness}; n = {cmp.n} examples both scored"
    )
)
ui.download_report(ws, [ra.name, rb.name], key="cmp_download")
if cmp.message:
    st.warning(ui.md(cmp.message))
    st.stop()

st.subheader("Flips per criterion")
st.dataframe(ui.flips_frame(cmp), hide_index=True, key="cmp_flips", width="stretch")

left, right = st.columns(2)
with left:
    st.subheader("All-pass rate")
    m1, m2 = st.columns(2)
    pa, pb = cmp.all_pass_rate
    m1.metric(ui.md(f"A · {ra.harness}"), ui.fmt(pa, ".1%"))
    m2.metric(
        ui.md(f"B · {rb.harness}"),
        ui.fmt(pb, ".1%"),
        delta=ui.points(pa, pb),
    )
    st.caption(f"n = {cmp.n}; an example passes when every criterion passes.")
    st.subheader("Cost")
    cost = ui.cost_frame(cmp)
    st.dataframe(cost, hide_index=True, key="cmp_cost", width="stretch")
    for side, c in (("A", cmp.cost[0]), ("B", cmp.cost[1])):
        if c.note:
            st.caption(ui.md(f"{side}: {c.note}"))
with right:
    st.subheader("Failure attribution")
    st.plotly_chart(
        ui.attribution_figure(cmp, (f"A: {ra.name}", f"B: {rb.name}")),
        key="cmp_attribution",
        width="stretch",
    )
    st.caption(ui.md(f"failed verdicts per criterion on the {cmp.n} examples both runs scored"))

st.subheader("Cost vs agreement with the humans, every run of the dataset")
if not ws.has_labels:
    ui.no_labels()
else:
    frame = ui.cost_vs_agreement(ws)
    fig, x_label = ui.cost_vs_agreement_figure(frame)
    st.plotly_chart(fig, key="cmp_cost_agreement", width="stretch")
    st.caption(
        ui.md(
            f"x = {x_label}; y = mean Cohen's κ over the criteria against {ws.judge('human')} "
            f"(n up to {int(frame['n'].max()) if len(frame) else 0} labelled examples per run)"
        )
    )
    st.dataframe(frame, hide_index=True, key="cmp_cost_table", width="stretch")

st.subheader("Flipped examples")
changed = [k for k, f in cmp.flips.items() if f.fail_to_pass + f.pass_to_fail]
if not changed:
    st.info("No verdict flipped between the two runs.", icon=":material/info:")
    st.stop()
f1, f2 = st.columns(2)
with f1:
    crit = ui.pick(
        "Criterion",
        changed,
        key="cmp_flip_criterion",
        default=max(changed, key=lambda k: cmp.flips[k].fail_to_pass + cmp.flips[k].pass_to_fail),
    )
with f2:
    f2p, p2f = cmp.flip_ids[crit]
    direction = ui.pick(
        "Direction",
        ["fail→pass", "pass→fail"],
        key="cmp_flip_direction",
        default="fail→pass" if f2p else "pass→fail",
        widget=st.radio,
        horizontal=True,
        format_func=lambda d: f"{d} ({len(f2p) if d == 'fail→pass' else len(p2f)})",
    )
ids = f2p if direction == "fail→pass" else p2f
if not ids:
    st.info("No example flipped this way.", icon=":material/info:")
    st.stop()
shown = ids[:200]
with session() as s:
    texts = ui.example_texts(s, ws.dataset_id, shown)
st.caption(ui.md(f"{len(ids)} examples {direction} on {crit} from A to B; showing the first {len(shown)}."))
st.dataframe(texts, hide_index=True, key="cmp_flipped", width="stretch")
chosen = ui.pick("Read one example", ids[:1000], key="cmp_example")
with session() as s:
    detail = ui.example_detail(s, ws.dataset_id, chosen)
ui.render_example(detail, key="cmp_detail")
