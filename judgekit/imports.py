"""File imports: parse (pure, :mod:`judgekit.datasets`) → write (the store), all-or-nothing.

Shared by the CLI and the Data page so both give the same validation and messages. Each function
takes a ``Session`` the caller has opened in a transaction (``with Session(engine) as s, s.begin()``);
any error raises before — or rolls back with — the write, so a rejected file leaves no row behind.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from judgekit import datasets, reports, store
from judgekit.datasets import InputError
from judgekit.rubric import Criterion


@dataclass(frozen=True)
class ImportResult:
    kind: str
    name: str
    rows: int

    def summary(self) -> str:
        return f"imported {self.kind} {self.name!r}: {self.rows} rows"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during a bulk load: ~1M short-lived acyclic objects would
    otherwise trigger repeated full collections (measured: parsing 30k examples 1.7 s → 1.0 s)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def import_dataset(s: Session, path: str | Path, name: str) -> ImportResult:
    if not name or not name.strip():
        raise InputError(path, "a dataset needs a name (--name)")
    with gc_paused():
        rows = datasets.parse_dataset(path)
        try:
            store.insert_dataset(s, name.strip(), rows, source=Path(path).name)
        except ValueError as e:
            raise InputError(path, str(e)) from None
    return ImportResult("dataset", name.strip(), len(rows))


def import_rubric(s: Session, path: str | Path) -> ImportResult:
    rubric = datasets.parse_rubric(path)
    try:
        store.save_rubric(s, rubric)
    except ValueError as e:
        raise InputError(path, str(e), field="name") from None
    return ImportResult("rubric", rubric.name, len(rubric.criteria))


def label_criteria(s: Session, rubric: str | None = None) -> dict[str, Criterion]:
    """The criteria labels may name: one rubric's, or every rubric's (a key shared by rubrics must agree)."""
    if rubric:
        return {c.key: c for c in store.load_rubric(s, rubric).criteria}
    out: dict[str, Criterion] = {}
    for key, defs in store.criteria_by_key(s).items():
        kinds = {(c.kind, c.pass_at) for c in defs}
        if len(kinds) == 1:
            out[key] = defs[0]
    return out


def import_labels(
    s: Session, path: str | Path, dataset: str, *, annotator: str | None = None, rubric: str | None = None
) -> ImportResult:
    ds = store.get_dataset(s, dataset)
    ids = store.example_ids(s, ds.id)
    criteria = label_criteria(s, rubric)
    rows = datasets.parse_labels(path, example_ids=set(ids), criteria=criteria, annotator=annotator)
    store.upsert_labels(s, [{**r, "example_id": ids[r["example_id"]]} for r in rows])
    s.flush()
    reports.warm_cache(s, dataset=dataset)
    return ImportResult("labels", dataset, len(rows))


def import_run(s: Session, path: str | Path, *, dataset: str, rubric: str, name: str) -> ImportResult:
    """Verdicts produced elsewhere, stored as a run whose judge is ``imported``."""
    ds = store.get_dataset(s, dataset)
    rubric_row = store.get_rubric_row(s, rubric)
    rubric_val = store.rubric_value(s, rubric_row)
    ids = store.example_ids(s, ds.id)
    rows = datasets.parse_run_file(path, example_ids=set(ids), rubric=rubric_val)
    judge = store.get_or_create_judge(s, kind="imported", name=Path(path).name)
    covered = list(dict.fromkeys(ids[r["example_id"]] for r in rows))
    try:
        run = store.create_run(
            s,
            name=name,
            dataset=ds,
            rubric=rubric_row,
            judge=judge,
            harness={"kind": "imported"},
            example_ids=covered,
            sample={"file": Path(path).name},
            status="imported",
        )
    except ValueError as e:
        raise InputError(path, str(e), field="--name") from None
    crit_ids = {c.key: c.id for c in store.criterion_rows(s, rubric_row.id)}
    store.insert_verdicts(
        s,
        [
            {
                "run_id": run.id,
                "example_id": ids[r["example_id"]],
                "criterion_id": crit_ids[r["criterion"]],
                "value": r["value"],
                "rationale": r["rationale"],
                "p_pass": r["p_pass"],
                "red_flags": [],
                "error": None if r["value"] is not None else "unscored in the imported file",
                "call_id": None,
            }
            for r in rows
        ],
    )
    s.flush()
    reports.warm_cache(s, run=run.id)
    return ImportResult("run", name, len(rows))


def load_demo(s: Session, n_examples: int = 600, seed: int = 0) -> ImportResult | None:
    """The demo workspace (dataset, both rubrics, `reference` labels); None if it is already loaded."""
    from judgekit import demo

    if s.scalar(store.select(store.Dataset.id).where(store.Dataset.name == demo.DEMO_DATASET)) is not None:
        return None
    ws = demo.build_demo(n_examples=n_examples, seed=seed)
    store.insert_dataset(s, demo.DEMO_DATASET, ws.examples, source="judgekit demo")
    for rubric in ws.rubrics:
        if s.scalar(store.select(store.RubricRow.id).where(store.RubricRow.name == rubric.name)) is None:
            store.save_rubric(s, rubric)
    ids = store.example_ids(s, store.get_dataset(s, demo.DEMO_DATASET).id)
    store.upsert_labels(
        s,
        [
            {
                "example_id": ids[t["example_id"]],
                "criterion": t["criterion"],
                "annotator": demo.REFERENCE_ANNOTATOR,
                "value": t["value"],
                "note": None,
            }
            for t in ws.truth
        ],
    )
    s.flush()
    reports.warm_cache(s, dataset=demo.DEMO_DATASET)
    return ImportResult("demo", demo.DEMO_DATASET, len(ws.examples))


def export_labels(s: Session, dataset: str, out: str | Path) -> int:
    """Write a dataset's labels to JSONL (exact round-trip) or CSV (formula cells neutralised)."""
    import json

    ds = store.get_dataset(s, dataset)
    rows = store.labels_for_dataset(s, ds.id)
    kinds = {key: defs[0].kind for key, defs in store.criteria_by_key(s).items()}
    out = Path(out)
    if out.suffix.lower() == ".csv":
        text = datasets.dump_labels_csv([{**r, "kind": kinds.get(r["criterion"])} for r in rows], [])
    elif out.suffix.lower() in (".jsonl", ".ndjson"):
        lines = []
        for r in rows:
            value = r["value"]
            if value is not None and kinds.get(r["criterion"]) == "binary":
                value = bool(value)
            item = {
                "example_id": r["example_id"],
                "criterion": r["criterion"],
                "value": value,
                "annotator": r["annotator"],
            }
            if r["note"]:
                item["note"] = r["note"]
            lines.append(json.dumps(item, ensure_ascii=False))
        text = "\n".join(lines) + ("\n" if lines else "")
    else:
        raise InputError(out, "use a .jsonl or .csv file name", field="--out")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return len(rows)
