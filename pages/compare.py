"""Compare: two runs over the same examples — which verdicts flipped per criterion (McNemar), where the
failures are filed, all-pass rates, what each cost, and cost against agreement with the humans for every
run of the dataset."""

import streamlit as st

from judgekit import signin, ui, ui_noise

signin.page(
    "Compare",
    "Two harnesses over byte-identical stored outputs: a pass rate can stay put while the failures move "
    "to other criteria. Flips are counted on the examples both runs scored.",
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
c1, c2, c3 = st.columns([2, 2, 1.3], vertical_alignment="bottom")
with c1:
    a = ui.pick("Run A", run_keys, key="cmp_a", default=run_keys[0], format_func=ws.label, param="a")
with c2:
    b = ui.pick("Run B", run_keys, key="cmp_b", default=next(k for k in run_keys if k != a), format_func=ws.label,
                param="b")
with c3:
    labelled = ui.labelled_toggle(ws, key="cmp_labelled", default=False)
if a == b:
    st.info("Choose two different runs.", icon=":material/info:")
    st.stop()
ra, rb = ws.run(a), ws.run(b)
cmp = ui.compare(ws, a, b, labelled_only=labelled)
st.caption(
    ui.md(
        f"A = {ra.name} — judge: {ra.judge} · {ra.harness}; B = {rb.name} — judge: {rb.judge} · "
        f"{rb.harness}; n = {cmp.n:,} answers both scored" + (", only the labelled ones" if labelled else "")
    )
)
ui.download_report(ws, [ra.name, rb.name], key="cmp_download")
if cmp.message:
    st.warning(ui.md(cmp.message))
    st.stop()

st.subheader("Flips per criterion")
st.dataframe(ui.flips_frame(cmp), hide_index=True, key="cmp_flips", width="stretch")
ui_noise.noise_floor_section(ws, a, b, key="cmp_floor")

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
    st.caption(f"n = {cmp.n:,}; an answer passes when every criterion passes.")
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
    st.caption(ui.md(f"failed verdicts per criterion on the {cmp.n:,} answers both runs scored"))

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
            f"(n up to {int(frame['n'].max()) if len(frame) else 0:,} labelled answers per run); both axes start "
            "at 0 (κ lower if a run is below 0)"
        )
    )
    st.dataframe(frame, hide_index=True, key="cmp_cost_table", width="stretch", column_config={
        "calls": st.column_config.NumberColumn(format="localized"),
        "tokens": st.column_config.NumberColumn(format="localized"),
        "usd": st.column_config.NumberColumn("cost (USD)", format="$%.4f"),
        "mean_kappa": st.column_config.NumberColumn("mean κ", format="%.2f"),
        "n": st.column_config.NumberColumn("n labelled", format="localized"),
    })

ui_noise.planner_section(ws, a, b)

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
ui.examples_list(
    ws, ids, prefix="cmp", table_key="cmp_flipped", caption=f"{len(ids):,} answers {direction} on {crit} from A to B",
    examples_link={"sources": [a, b] + (["human"] if ws.has_labels else []), "criteria": [crit], "filter": "flips",
                   "labelled": str(labelled)},
    link_help="A and B (and the human column) side by side on every answer where they flip.",
)
