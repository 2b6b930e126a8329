"""Label: blind, keyboard-driven hand-labeling of label sets — the human column — plus label-set
creation and inter-annotator agreement / adjudication.

State model: the annotator's current choices live in ``st.session_state`` under
``label_v|ANNOTATOR|EXAMPLE|CRITERION`` (absent = not chosen yet, None = unsure); the buttons set them in
``on_click`` callbacks and "Save & next" writes them with :func:`actions.save_labels`. While an item is
being labeled nothing from any run or any other annotator is read, let alone shown.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from judgekit import actions, labeling, signin, store, ui
from judgekit.auth import Forbidden
from judgekit.rubric import Criterion
from judgekit.ui import md
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
    try:
        with session() as s:
            actions.save_labels(signin.identity(), s, example_id, values, criteria, note=note, annotator=annotator)
    except (ValueError, Forbidden) as e:
        _flash("error", md(f"Not saved: {e}."))
        return
    st.session_state[P + "last_saved"] = (set_id, example_id)
    _move(set_id, annotator, pos + 1)


def _set_role(name: str) -> None:
    with session() as s:
        actions.set_adjudicator(signin.identity(), s, bool(st.session_state[f"{P}adj|{name}"]), annotator=name)


def _remember_name() -> None:
    st.session_state[P + "annotator"] = st.session_state[P + "annotator_w"].strip()


def _adjudicate(example_id: int, criterion: Criterion, name: str, value: int | None) -> None:
    try:
        with session() as s:
            actions.adjudicate(signin.identity(), s, example_id, criterion, value, annotator=name)
    except (ValueError, Forbidden) as e:
        _flash("error", md(str(e)))


# --------------------------------------------------------------------------------------------- labeling


# Keys of the 1–5 scores of the first, second, … scale criterion (C and R are Streamlit's own keys).
SCALE_KEYS = ("ASDFG", "ZXVBN", "QWETY", "HJKLM", "UIOPL")
# Background of a chosen button: pass green, fail red, unsure grey, a score blue.
CHOSEN_STYLE = {"pass": "#1b7f3b", "fail": "#b3261e", "unsure": "#6b6b6b", "score": "#1f5fae"}


def _style() -> None:
    """Chosen buttons in their own colour, so a chosen pass never looks like a chosen fail (static CSS
    keyed on the containers' ``st-key-…`` classes; no user text goes into it)."""
    rules = "".join(
        f'[class*="st-key-{P}chosen-{kind}-"] button {{background:{colour};border-color:{colour};color:#fff}}'
        for kind, colour in CHOSEN_STYLE.items()
    )
    st.html(f"<style>{rules}</style>")


def _criterion_row(i: int, c: Criterion, annotator: str, example_id: int, scale_no: int | None) -> bool:
    """One criterion's controls: its number, key and question — for a scale also every level's description —
    beside its buttons, each with its key; returns whether a value is chosen."""
    vkey = _vkey(annotator, example_id, c.key)
    chosen = vkey in st.session_state
    current = st.session_state.get(vkey)
    state = ""
    if chosen:
        word = c.value_text(current, missing='unsure')
        colour = {"pass": "green", "fail": "red", "unsure": "gray"}.get(word, "blue")
        state = f" — :{colour}-background[{word}]"
    st.markdown(f"**{i}\\. {md(c.key)}**{state} :gray[{md(c.question)}]")
    digit = str(i) if i <= 9 else None
    options: list[tuple[str, int | None, str | None, str]]
    if c.is_scale:
        letters = SCALE_KEYS[scale_no] if scale_no is not None and scale_no < len(SCALE_KEYS) else None
        options = [(str(v), v, letters[v - 1] if letters else None, "score") for v in (1, 2, 3, 4, 5)]
        st.caption(md(" · ".join(f"{v} {c.levels[v]}" for v in sorted(c.levels))))
        cols = st.columns([1, 1, 1, 1, 1, 1.6])
    else:
        options = [("Pass", 1, digit, "pass"), ("Fail", 0, f"Shift+{digit}" if digit else None, "fail")]
        cols = st.columns(3)
    options.append(("Unsure", None, None, "unsure"))
    for col, (text, value, shortcut, kind) in zip(cols, options, strict=True):
        picked = chosen and current == value
        state_key = f"{P}{'chosen' if picked else 'open'}-{kind}-{c.key}-{'u' if value is None else value}"
        with col, st.container(key=state_key):
            st.button(
                text,
                key=f"{P}{c.key}_{'unsure' if value is None else value}",
                help=c.question if not c.is_scale or value is None else c.levels.get(value, c.question),
                icon=":material/check:" if picked else None,
                shortcut=shortcut,
                on_click=_choose,
                args=(annotator, example_id, c.key, value),
                width="stretch",
            )
    return chosen


def _status(info: labeling.LabelSetInfo, annotator: str) -> None:
    """The label set as a whole: who has labelled how much, and how much of it has a consensus."""
    with session() as s:
        status = labeling.set_status(s, info)
    who = ", ".join(f"{a} {n}" for a, n in status.labelled.items()) or "nobody yet"
    st.caption(
        md(
            f"Label set {info.name}: {status.size:,} items · labelled by {who} · consensus on every criterion: "
            f"{status.settled:,} · split (a tie): {status.split:,} · no label yet: {status.open:,}"
        )
    )


def _keys_help(info: labeling.LabelSetInfo) -> None:
    """The keyboard help, short, in the sidebar (always on screen)."""
    scale = [c for c in info.criteria if c.is_scale]
    lines = []
    if any(not c.is_scale for c in info.criteria):
        lines.append("**1–9** pass criterion 1–9 · **Shift+1–9** fail it")
    if scale:
        lines += [f"{md(c.key)}: **{' '.join(SCALE_KEYS[n])}** score 1–5"
                  for n, c in enumerate(scale[: len(SCALE_KEYS)])]
    lines.append("**Enter** save & next · **→** skip · **←** back")
    with st.sidebar:
        st.markdown("**Keys**  \n" + "  \n".join(lines))
        st.caption("Keys pause while the cursor is in a text box.")


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
        by_key[k].value_text(mine[k], missing="unsure") if k in mine and k in by_key else "" for k in frame["criterion"]
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
        conflicts = store.label_key_conflicts(s)
    n = len(items)
    pos_key = _pos_key(info.id, annotator)
    if pos_key not in st.session_state:  # resume where this annotator left off
        st.session_state[pos_key] = prog.first_open if prog.first_open is not None else n
    pos = min(st.session_state[pos_key], n)
    flash = st.session_state.pop(P + "flash", None)

    if pos >= n:
        st.progress(prog.labelled / max(n, 1), text=f"All {n} items seen · {prog.labelled} of {n} labelled")
        st.success(md(f"You have reached the end of {info.name}."))
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

    _style()
    _keys_help(info)
    st.progress(
        prog.labelled / max(n, 1),
        text=f"Item {pos + 1} of {n} · {prog.labelled} of {n} labelled by {md(annotator)}",
    )
    _status(info, annotator)
    for c in info.criteria:
        if c.key in conflicts:
            st.warning(md(f"Labels for {c.key} cannot be saved: {conflicts[c.key]}."))
    if flash:
        getattr(st, flash[0])(flash[1])
    text_col, judge_col = st.columns([1.05, 1], gap="large")
    with text_col:
        st.caption(f"Example {md(ex.ext_id)}" + (" · you labelled this one before (editing)" if saved else ""))
        st.markdown("**Question**")
        st.text(ex.question or "(none)")
        if ex.context:
            st.markdown("**Context**")
            st.code(ex.context, language=None, wrap_lines=True)
        st.markdown("**Answer**")
        st.code(ex.answer, language=None, wrap_lines=True)
    with judge_col:
        st.markdown("**Your judgement**")
        scale_no = {c.key: n for n, c in enumerate(c for c in info.criteria if c.is_scale)}
        n_chosen = sum(_criterion_row(i, c, annotator, example_id, scale_no.get(c.key))
                       for i, c in enumerate(info.criteria, start=1))
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
        captions=[
            "uniform sample",
            "from a cross-tab cell of a run",
            "where two runs disagree",
            "answers that would decide the audit's undecided pairs",
        ],
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
    elif strategy == "decide":
        chosen = st.multiselect("Runs to audit", runs, default=runs, key=P + "new_decide_runs")
        opts["runs"] = tuple(chosen)
        st.caption(
            "The association audit of these runs against the current human column names the pairs it cannot "
            "decide yet and how many more labels each needs, from which of the reference harness's cells. "
            "The size is split over those pairs; answers are drawn at random within each cell from the "
            "answers nobody has labelled (so the audit stays unbiased). With no labels yet it draws at random."
        )
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
                info = actions.create_label_set(signin.identity(), s, name, dataset=dataset, rubric=rubric, spec=spec)
        except (ValueError, store.NotFound, Forbidden) as e:
            st.error(md(str(e)))
        else:
            st.session_state[P + "set"] = info.name
            strata = ", ".join(f"{k}: {v}" for k, v in info.strategy.get("strata", {}).items())
            st.success(ui.md(f"Created {info.name}: {info.size} examples ({info.strategy['description']}; "
                             f"{strata})."))


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
                        f"{a}: {by_key[d.criterion].value_text(v, missing='unsure')}" for a, v in d.votes.items()
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

who = signin.page("Label")

c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
if who.name is not None:  # labels carry the signed-in name, never a typed one
    c1.text("Labeling as " + who.name)
    annotator = who.name
else:
    if P + "annotator_w" not in st.session_state:
        st.session_state[P + "annotator_w"] = st.session_state.get(P + "annotator", "")
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
