"""Data: upload a dataset, rubric, labels or an external run — same validation and messages as the CLI."""

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from judgekit import actions, datasets, signin, store, ui
from judgekit.auth import Forbidden
from judgekit.datasets import InputError
from judgekit.webapp import session, upload_error

who = signin.page(
    "Data",
    "Every file is checked whole before anything is written: one message naming the file, line and "
    "field, and nothing stored if it is wrong. Formats: see the README.",
)

KINDS = {
    "Dataset (.jsonl / .csv / .json)": ["jsonl", "csv", "json"],
    "Rubric (.yaml / .json)": ["yaml", "yml", "json"],
    "Labels (.jsonl / .csv)": ["jsonl", "csv"],
    "External run (.jsonl / .csv)": ["jsonl", "csv"],
}
kind = st.radio("What are you uploading?", list(KINDS), key="data_kind", horizontal=True)
upload = st.file_uploader("File", type=KINDS[kind], key=f"data_file_{kind}")

with session() as s:
    dataset_names = [d["name"] for d in store.list_datasets(s)]
    rubric_names = [r["name"] for r in store.list_rubrics(s)]

name = dataset = rubric = annotator = None
if kind.startswith("Dataset"):
    # a new file names the dataset after itself, unless the user has typed a name of their own
    stem = Path(upload.name).stem if upload is not None else ""
    previous = st.session_state.get("data_named_after", "")
    if stem != previous and st.session_state.get("data_dataset_name", "") in ("", previous):
        st.session_state["data_dataset_name"] = stem
    st.session_state["data_named_after"] = stem
    name = st.text_input("Dataset name", key="data_dataset_name")
elif kind.startswith("Labels"):
    dataset = st.selectbox("Dataset", dataset_names, key="data_labels_dataset")
    if who.name is None:
        annotator = (
            st.text_input("Annotator (for rows that do not name one)", key="data_labels_annotator") or None
        )
    else:
        st.text(f"Rows that name no annotator are labels of {who.name} (you).")
elif kind.startswith("External"):
    c1, c2, c3 = st.columns(3)
    dataset = c1.selectbox("Dataset", dataset_names, key="data_run_dataset")
    rubric = c2.selectbox("Rubric", rubric_names, key="data_run_rubric")
    name = c3.text_input("Run name", key="data_run_name")

if upload is None:
    st.stop()


def missing_name() -> str | None:
    """What the form still lacks before an import can be tried (a name, or a run name not yet taken)."""
    if kind.startswith(("Dataset", "External")) and not (name or "").strip():
        return f"Name the {'dataset' if kind.startswith('Dataset') else 'run'} in the box above."
    if kind.startswith("External"):
        with session() as s:
            if store.existing_run_names(s, [name.strip()]):
                return ui.md(f"A run named {name.strip()} already exists: choose another name.")
    return None


def check_and_import(folder: Path) -> None:
    """Preview the upload (datasets, rubrics) and import it on the button — from a copy in ``folder``."""
    path = folder / Path(upload.name).name
    path.write_bytes(upload.getvalue())
    try:
        if kind.startswith("Dataset"):
            preview = pd.DataFrame(datasets.parse_dataset(path)[:20])
        elif kind.startswith("Rubric"):
            preview = pd.DataFrame(
                [
                    {"key": c.key, "kind": c.kind, "question": c.question, "pass_at": c.pass_at}
                    for c in datasets.parse_rubric(path).criteria
                ]
            )
        else:
            preview = None
    except InputError as e:
        upload_error(e, folder)
        return

    if preview is not None:
        st.caption(ui.md(f"Preview of {upload.name} (first rows, as they will be stored):"))
        st.dataframe(preview, hide_index=True, key="data_preview")

    if st.button("Import", type="primary", key="data_import"):
        if problem := missing_name():
            st.error(problem)
            return
        try:
            with session() as s:
                if kind.startswith("Dataset"):
                    result = actions.import_dataset(who, s, path, name or "")
                elif kind.startswith("Rubric"):
                    result = actions.import_rubric(who, s, path)
                elif kind.startswith("Labels"):
                    if not dataset:
                        raise InputError(path, "import a dataset first")
                    result = actions.import_labels(who, s, path, dataset, annotator=annotator)
                else:
                    if not (dataset and rubric and name):
                        raise InputError(path, "choose a dataset and a rubric and name the run")
                    result = actions.import_run(who, s, path, dataset=dataset, rubric=rubric, name=name)
        except (InputError, store.NotFound, Forbidden) as e:
            upload_error(e, folder)
        else:
            st.success(result.summary())


# The file is saved under its own name so every message names it exactly as the user knows it, in a
# folder that is removed when this script run ends (each rerun writes it afresh).
with tempfile.TemporaryDirectory(prefix="judgekit-upload-") as tmp:
    check_and_import(Path(tmp))
