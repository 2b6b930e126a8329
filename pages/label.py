"""Label: blind, keyboard-driven hand-labeling of label sets — the human column — plus label-set
creation and inter-annotator agreement / adjudication.

State model: the annotator's current choices live in ``st.session_state`` under
``label_v|ANNOTATOR|EXAMPLE|CRITERION`` (absent = not chosen yet, None = unsure); the buttons set them in
``on_click`` callbacks and "Save & next" writes them with :func:`labeling.save_item`. While an item is
being labeled nothing from any run or any other annotator is read, let alone shown.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from judgekit import labeling, store
from judgekit.rubric import Criterion
from judgekit.webapp import empty_state, session

P = "label_"
MODES = ("Label", "Label sets", "Agreement")
SAVE_KEY, SKIP_KEY, BACK_KEY = "Enter", "Right", "Left"


def _vkey(annotator: str, example_id: int, key: str) -> str:
    return f"{P}v|{annotator}|{example_id}|{key}"


def _note_key(annotator: str, example_id: int) -> str:
    return f"{P}note|{annotator}|{example_id}"


def _pos_key(set_id: int, annotator: str) -> str:
    return f"{P}pos|{set_id}|{annotator}"


def _flash(kind: str, message: str) -> None:
    st.session_state[P + "flash"] = (kind, message)


# --------------------------------------------------------------------------------------------- callbacks


def _choose(annotator: str, example_id: int, key: str, value: int | None) -> None:
    st.session_state[_vkey(annotator, example_id, key)] = value


def _move(set_id: int, annotator: str, to: int) -> None:
    st.session_state[_pos_key(set_id, annotator)] = max(0, to)


def _save(set_id: int, annotator: str, example_id: int, criteria: tuple[Criterion, ...], pos: int) -> None:
    keys = [c.key for c in criteria]
    missing = [k for k in keys if _vkey(annotator, example_id, k) not in st.session_state]
    if missing:
        _flash("warning", f"Not saved: choose pass, fail or unsure for {', '.join(missing)}.")
        return
    values = {k: st.session_state[_vkey(annotator, example_id, k)] for k in keys}
    note = st.session_state.get(_note_key(annotator, example_id))
    with session() as s:
        labeling.save_item(s, example_id, annotator, values, criteria, note=note)
    st.session_state[P + "last_saved"] = (set_id, example_id)
    _move(set_id, annotator, pos + 1)


def _set_role(name: str) -> None:
    role = "adjudicator" if st.session_state[f"{P}adj|{name}"] else "annotator"
    with session() as s:
        labeling.set_role(s, name, role)


def _remember_name() -> None:
    st.session_state[P + "annotator"] = st.session_state[P + "annotator_w"].strip()


def _adjudicate(example_id: int, criterion: Criterion, name: str, value: int | None) -> None:
    try:
        with session() as s:
            labeling.adjudicate(s, example_id, criterion, name, value)
    except ValueError as e:
        _flash("error", str(e))


# --------------------------------------------------------------------------------------------- labeling


def _value_text(c: Criterion, value: int | None) -> str:
    if value is None:
        return "unsure"
    return str(value) if c.is_scale else ("pass" if value else "fail")


def _criterion_row(i: int, c: Criterion, annotator: str, example_id: int) -> bool:
    """One criterion's controls; returns whether a value is chosen."""
    vkey = _vkey(annotator, example_id, c.key)
    chosen = vkey in st.session_state
    current = st.session_state.get(vkey)
    label_col, *cols = st.columns(
        [3, 1, 1, 1, 1, 1, 1] if c.is_scale else [3, 1, 1, 1], vertical_alignment="center"
    )
    with label_col:
        state = f" — **{_value_text(c, current)}**" if chosen else ""
        st.markdown(f"{i}. `{c.key}`{state}", help=c.question)
    digit = str(i) if i <= 9 else None
    if c.is_scale:
        options: list[tuple[str, int | None, str | None]] = [(str(v), v, None) for v in (1, 2, 3, 4, 5)]
    else:
        options = [("Pass", 1, digit), ("Fail", 0, f"Shift+{digit}" if digit else None)]
    options.append(("Unsure", None, None))
    for col, (text, value, shortcut) in zip(cols, options, strict=True):
        with col:
            st.button(
                text,
                key=f"{P}{c.key}_{'unsure' if value is None else value}",
                help=c.question,
                type="primary" if chosen and current == value else "secondary",
                shortcut=shortcut,
                on_click=_choose,
                args=(annotator, example_id, c.key, value),
                width="stretch",
            )
    return chosen


def _reveal(set_id: int, annotator: str, criteria: tuple[Criterion, ...]) -> None:
    last = st.session_state.get(P + "last_saved")
    if not last or last[0] != set_id:
        return
    st.divider()
    if not st.toggle("Reveal how the runs judged the example you just saved", key=P + "reveal", value=False):
        return
    with session() as s:
        ex = labeling.example_text(s, last[1])
        rows = labeling.run_verdicts(s, last[1])
        mine, _ = labeling.own_labels(s, last[1], annotator)
    st.text(f"Example {ex.ext_id} (saved)")
    if not rows:
        st.caption("No run has judged this example.")
        return
    by_key = {c.key: c for c in criteria}
    frame = pd.DataFrame(rows)
    frame["you"] = [
        _value_text(by_key[k], mine[k]) if k in mine and k in by_key else "" for k in frame["criterion"]
    ]
    st.dataframe(
        frame[["run", "judge", "criterion", "you", "verdict", "rationale"]],
        hide_index=True,
        key=P + "reveal_table",
    )


def label_mode(info: labeling.LabelSetInfo, annotator: str) -> None:
    with session() as s:
        items = labeling.label_set_items(s, info.id)
        prog = labeling.progress(s, info.id, annotator)
    n = len(items)
    pos_key = _pos_key(info.id, annotator)
    if pos_key not in st.session_state:  # resume where this annotator left off
        st.session_state[pos_key] = prog.first_open if prog.first_open is not None else n
    pos = min(st.session_state[pos_key], n)
    flash = st.session_state.pop(P + "flash", None)

    if pos >= n:
        st.progress(prog.labelled / max(n, 1), text=f"All {n} items seen · {prog.labelled} of {n} labelled")
        st.success(f"You have reached the end of {info.name}.")
        c1, c2 = st.columns(2)
        c1.button("Back", key=P + "back", shortcut=BACK_KEY, on_click=_move, args=(info.id, annotator, n - 1))
        c2.button("Start again from item 1", key=P + "restart", on_click=_move, args=(info.id, annotator, 0))
        _reveal(info.id, annotator, info.criteria)
        return

    example_id = items[pos]
    with session() as s:
        ex = labeling.example_text(s, example_id)
        loaded_key = f"{P}loaded|{annotator}|{example_id}"
        saved, note = labeling.own_labels(s, example_id, annotator)
    if loaded_key not in st.session_state:  # first visit this session: start from what was saved
        for k, v in saved.items():
            st.session_state.setdefault(_vkey(annotator, example_id, k), v)
        st.session_state[loaded_key] = True

    st.progress(
        prog.labelled / max(n, 1),
        text=f"Item {pos + 1} of {n} · {prog.labelled} of {n} labelled by {annotator}",
    )
    if flash:
        getattr(st, flash[0])(flash[1])
    st.caption(f"Example {ex.ext_id}" + (" · you labelled this one before (editing)" if saved else ""))

    st.markdown("**Question**")
    st.text(ex.question or "(none)")
    if ex.context:
        st.markdown("**Context**")
        st.code(ex.context, language=None, wrap_lines=True)
    st.markdown("**Answer**")
    st.code(ex.answer, language=None, wrap_lines=True)

    st.markdown("**Your judgement**")
    n_chosen = sum(_criterion_row(i, c, annotator, example_id) for i, c in enumerate(info.criteria, start=1))
    st.caption(f"{n_chosen} of {len(info.criteria)} criteria chosen")
    st.text_area("Note (optional)", value=note or "", key=_note_key(annotator, example_id), height=68)

    b1, b2, b3 = st.columns(3)
    b1.button(
        "Back",
        key=P + "back",
        shortcut=BACK_KEY,
        disabled=pos == 0,
        on_click=_move,
        args=(info.id, annotator, pos - 1),
        width="stretch",
    )
    b2.button(
        "Skip",
        key=P + "skip",
        shortcut=SKIP_KEY,
        on_click=_move,
        args=(info.id, annotator, pos + 1),
        width="stretch",
    )
    b3.button(
        "Save & next",
        key=P + "save",
        shortcut=SAVE_KEY,
        type="primary",
        width="stretch",
        on_click=_save,
        args=(info.id, annotator, example_id, info.criteria, pos),
    )
    with st.expander("Go to item"):
        st.number_input("Item", min_value=1, max_value=n, key=P + "goto")
        st.button(
            "Go", key=P + "go", on_click=lambda: _move(info.id, annotator, st.session_state[P + "goto"] - 1)
        )
    st.caption(
        "Keyboard: **1–9** pass criterion 1–9 · **Shift+1–9** fail it · **Enter** save & next · **→** skip · "
        "**←** back. Unsure and 1–5 scores: click. Shortcuts pause while the cursor is in a text box "
        "(click outside it first). Judge verdicts stay hidden until you save."
    )
    _reveal(info.id, annotator, info.criteria)


# --------------------------------------------------------------------------------------------- label sets


def sets_mode() -> None:
    with session() as s:
        sets = labeling.list_label_sets(s)
        datasets = [d["name"] for d in store.list_datasets(s)]
        rubrics = [r["name"] for r in store.list_rubrics(s)]
    if sets:
        frame = pd.DataFrame(sets)
        frame["labelled"] = frame["labelled"].map(lambda d: ", ".join(f"{a} {k}" for a, k in d.items()))
        st.dataframe(
            frame[["name", "dataset", "rubric", "size", "description", "seed", "labelled"]],
            hide_index=True,
            key=P + "sets_table",
        )
    if not datasets or not rubrics:
        empty_state("Load the demo (Workspace page) or import a dataset and a rubric first.")
        return
    st.subheader("New label set")
    name = st.text_input("Name", key=P + "new_name")
    c1, c2 = st.columns(2)
    dataset = c1.selectbox("Dataset", datasets, key=P + "new_dataset")
    rubric = c2.selectbox("Rubric (criteria to label)", rubrics, key=P + "new_rubric")
    strategy = st.radio(
        "Strategy",
        labeling.STRATEGIES,
        horizontal=True,
        key=P + "new_strategy",
        captions=["uniform sample", "from a cross-tab cell of a run", "where two runs disagree"],
    )
    c1, c2 = st.columns(2)
    size = c1.number_input("Size", min_value=1, max_value=100_000, value=60, key=P + "new_size")
    seed = c2.number_input("Seed", min_value=0, value=0, key=P + "new_seed")
    with session() as s:
        runs = labeling.runs_for_dataset(s, store.get_dataset(s, dataset).id)
    opts: dict = {}
    if strategy != "random" and not runs:
        empty_state(f"No run has judged {dataset} yet: sample at random, or start a run first.")
        return
    if strategy == "cell":
        opts["run"] = st.selectbox("Run", runs, key=P + "new_run")
        with session() as s:
            keys = labeling.run_criteria(s, opts["run"])
        c1, c2, c3 = st.columns(3)
        opts["row"] = c1.selectbox("Row criterion", keys, key=P + "new_row")
        opts["col"] = c2.selectbox("Column criterion", keys, index=min(1, len(keys) - 1), key=P + "new_col")
        cell = c3.selectbox(
            "Cell (row/col)", ["all four, equal numbers", *labeling.CELLS], key=P + "new_cell"
        )
        opts["cell"] = None if cell.startswith("all") else cell
    elif strategy == "disagree":
        c1, c2 = st.columns(2)
        opts["run_a"] = c1.selectbox("Run A", runs, key=P + "new_run_a")
        opts["run_b"] = c2.selectbox("Run B", runs, index=min(1, len(runs) - 1), key=P + "new_run_b")
        with session() as s:
            keys = labeling.run_criteria(s, opts["run_a"])
        c1, c2 = st.columns(2)
        opts["criterion"] = c1.selectbox("Criterion", keys, key=P + "new_criterion")
        way = c2.selectbox(
            "Direction", ["either way", "A fails, B passes", "A passes, B fails"], key=P + "new_direction"
        )
        opts["cell"] = {"A fails, B passes": "fail/pass", "A passes, B fails": "pass/fail"}.get(way)
    if st.button("Create label set", key=P + "create", type="primary"):
        spec = labeling.SampleSpec(strategy=strategy, size=int(size), seed=int(seed), **opts)
        try:
            with session() as s:
                info = labeling.create_label_set(s, name, dataset=dataset, rubric=rubric, spec=spec)
        except (ValueError, store.NotFound) as e:
            st.error(str(e))
        else:
            st.session_state[P + "set"] = info.name
            st.success(f"Created {info.name}: {info.size} examples ({info.strategy['description']}).")


# --------------------------------------------------------------------------------------------- agreement


def _fmt(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def agreement_mode(info: labeling.LabelSetInfo, annotator: str, is_adjudicator: bool) -> None:
    by_key = {c.key: c for c in info.criteria}
    with session() as s:
        items = labeling.label_set_items(s, info.id)
        rel = labeling.inter_annotator(s, info.dataset_id, info.criteria, example_ids=items)
        dis = labeling.disagreements(s, info.dataset_id, info.criteria, example_ids=items)
    st.subheader("Inter-annotator agreement")
    st.caption(
        "Over this label set's items; `reference` and adjudicators are left out. α: Krippendorff "
        "(nominal; ordinal for scales) over items with ≥ 2 labels; κ: Cohen, per annotator pair."
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "criterion": r.criterion,
                    "kind": r.kind,
                    "items": r.n_units,
                    "alpha": _fmt(r.alpha),
                    "mean kappa": _fmt(r.mean_kappa),
                    "pairs": "; ".join(
                        f"{p['a']}–{p['b']} κ {_fmt(p['kappa'])} (n {p['n']})" for p in r.pairs
                    ),
                }
                for r in rel
            ]
        ),
        hide_index=True,
        key=P + "rel_table",
    )

    st.subheader(f"Disagreements ({len(dis)})")
    flash = st.session_state.pop(P + "flash", None)
    if flash:
        getattr(st, flash[0])(flash[1])
    if not dis:
        st.caption("No item where annotators' labels split.")
        return

    def outcome(x: float | None) -> str:
        return "—" if x is None or math.isnan(x) else ("pass" if x == 1.0 else "fail")

    st.dataframe(
        pd.DataFrame(
            [
                {
                    "example": d.ext_id,
                    "criterion": d.criterion,
                    "votes": ", ".join(
                        f"{a}: {_value_text(by_key[d.criterion], v)}" for a, v in d.votes.items()
                    ),
                    "majority": outcome(d.majority),
                    "adjudicated": outcome(d.adjudicated),
                    "consensus": outcome(d.consensus),
                }
                for d in dis
            ]
        ),
        hide_index=True,
        key=P + "dis_table",
    )
    if not is_adjudicator:
        st.caption("Tick **I adjudicate** above to settle these: an adjudicator's label wins.")
        return
    labels = [f"{d.ext_id} · {d.criterion}" for d in dis]
    pick = st.selectbox("Settle", range(len(dis)), format_func=labels.__getitem__, key=P + "adj_pick")
    d = dis[pick]
    c = by_key[d.criterion]
    with session() as s:
        ex = labeling.example_text(s, d.example_id)
    with st.expander("Question, context and answer", expanded=True):
        st.text(ex.question)
        st.code(ex.context, language=None, wrap_lines=True)
        st.code(ex.answer, language=None, wrap_lines=True)
    values: list[tuple[str, int | None]] = (
        [(str(v), v) for v in (1, 2, 3, 4, 5)] if c.is_scale else [("Settle: pass", 1), ("Settle: fail", 0)]
    )
    values.append(("Clear my settlement", None))
    for col, (text, value) in zip(st.columns(len(values)), values, strict=True):
        col.button(
            text,
            key=f"{P}adj_{'clear' if value is None else value}",
            on_click=_adjudicate,
            args=(d.example_id, c, annotator, value),
        )


# --------------------------------------------------------------------------------------------- page

st.title("Label")

if P + "annotator_w" not in st.session_state:
    st.session_state[P + "annotator_w"] = st.session_state.get(P + "annotator", "")
c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
c1.text_input(
    "Your name",
    key=P + "annotator_w",
    on_change=_remember_name,
    placeholder="who is labeling (kept for this browser session)",
)
annotator = st.session_state[P + "annotator_w"].strip()
st.session_state[P + "annotator"] = annotator
is_adjudicator = False
if annotator:
    adj_key = f"{P}adj|{annotator}"
    if adj_key not in st.session_state:
        with session() as s:
            st.session_state[adj_key] = labeling.annotator_role(s, annotator) == "adjudicator"
    is_adjudicator = c2.checkbox(
        "I adjudicate",
        key=adj_key,
        on_change=_set_role,
        args=(annotator,),
        help="An adjudicator's labels settle the human consensus wherever present.",
    )

mode = st.radio("Mode", MODES, horizontal=True, key=P + "mode", label_visibility="collapsed")

if mode == "Label sets":
    sets_mode()
    st.stop()

with session() as s:
    set_names = [r["name"] for r in labeling.list_label_sets(s)]
if not set_names:
    empty_state("No label sets yet: create one under **Label sets** (or `judgekit label-set create`).")
    st.stop()
if st.session_state.get(P + "set") not in set_names:
    st.session_state[P + "set"] = set_names[-1]
set_name = st.selectbox("Label set", set_names, key=P + "set")
with session() as s:
    info = labeling.get_label_set(s, set_name)

if not annotator:
    empty_state("Enter your name above to start labeling.")
    st.stop()
if mode == "Label":
    label_mode(info, annotator)
else:
    agreement_mode(info, annotator, is_adjudicator)
