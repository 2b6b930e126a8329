"""Data: upload a dataset, rubric, labels or an external run — same validation and messages as the CLI."""

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from judgekit import datasets, imports, store
from judgekit.datasets import InputError
from judgekit.webapp import session, upload_error

st.title("Data")
st.caption(
    "Every file is checked whole before anything is written: one message naming the file, line and "
    "field, and nothing stored if it is wrong. Formats: see the README."
)

KINDS = {
    "Dataset (.jsonl / .csv)": ["jsonl", "csv"],
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
    name = st.text_input(
        "Dataset name", key="data_dataset_name", value=Path(upload.name).stem if upload is not None else ""
    )
elif kind.startswith("Labels"):
    dataset = st.selectbox("Dataset", dataset_names, key="data_labels_dataset")
    annotator = (
        st.text_input("Annotator (for rows that do not name one)", key="data_labels_annotator") or None
    )
elif kind.startswith("External"):
    c1, c2, c3 = st.columns(3)
    dataset = c1.selectbox("Dataset", dataset_names, key="data_run_dataset")
    rubric = c2.selectbox("Rubric", rubric_names, key="data_run_rubric")
    name = c3.text_input("Run name", key="data_run_name")

if upload is None:
    st.stop()

# The file is saved under its own name so every message names it exactly as the user knows it.
folder = Path(tempfile.mkdtemp(prefix="judgekit-upload-"))
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
    st.stop()

if preview is not None:
    st.caption(f"Preview of {upload.name} (first rows, as they will be stored):")
    st.dataframe(preview, hide_index=True, key="data_preview")

if st.button("Import", type="primary", key="data_import"):
    try:
        with session() as s:
            if kind.startswith("Dataset"):
                result = imports.import_dataset(s, path, name or "")
            elif kind.startswith("Rubric"):
                result = imports.import_rubric(s, path)
            elif kind.startswith("Labels"):
                if not dataset:
                    raise InputError(path, "import a dataset first")
                result = imports.import_labels(s, path, dataset, annotator=annotator)
            else:
                if not (dataset and rubric and name):
                    raise InputError(path, "choose a dataset and a rubric and name the run")
                result = imports.import_run(s, path, dataset=dataset, rubric=rubric, name=name)
    except (InputError, store.NotFound) as e:
        upload_error(e, folder)
    else:
        st.success(result.summary())
