"""The matrix cache: hits return what the store says, any change to the data is a miss."""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from judgekit import imports, matrix_cache, reports, store


def test_cache_roundtrip_and_versioning(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"a": np.arange(3.0), "s": np.asarray(["x", "yy"], dtype=np.str_)}

    first = matrix_cache.cached("sqlite:///x", "run", "1", "v1", compute)
    again = matrix_cache.cached("sqlite:///x", "run", "1", "v1", compute)
    assert len(calls) == 1 and np.array_equal(again["a"], first["a"]) and again["s"].tolist() == ["x", "yy"]
    matrix_cache.cached("sqlite:///x", "run", "1", "v2", compute)
    assert len(calls) == 2
    files = list((tmp_path / ".cache" / "judgekit").rglob("run-*.npz"))
    assert len(files) == 1  # the stale version was replaced


def test_reports_see_new_verdicts_labels_and_recreated_runs(cli, engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    def write_run(path, value):
        path.write_text("".join(
            f'{{"example_id": "q-{i:04d}", "criterion": "concise", "verdict": {value}}}\n' for i in range(1, 11)
        ))

    tmp = store.config.home()
    write_run(tmp / "r1.jsonl", "true")
    assert cli("import-run", tmp / "r1.jsonl", "--dataset", "demo", "--rubric", "demo", "--name", "r").exit_code == 0
    with Session(engine) as s:
        assert np.nansum(reports.load_run(s, "r").binary) == 10
    # delete and re-create a run under the same name (and, in SQLite, the same id): no stale cache
    with Session(engine) as s, s.begin():
        store.delete_run(s, store.get_run(s, "r"))
    write_run(tmp / "r2.jsonl", "false")
    assert cli("import-run", tmp / "r2.jsonl", "--dataset", "demo", "--rubric", "demo", "--name", "r").exit_code == 0
    with Session(engine) as s:
        assert np.nansum(reports.load_run(s, "r").binary) == 0
    # a changed label is seen by the human column
    with Session(engine) as s:
        before = reports.load_human(s, "demo").binary.copy()
    with Session(engine) as s, s.begin():
        ex = store.example_ids(s, store.get_dataset(s, "demo").id)["q-0001"]
        old = [r for r in store.labels_for_dataset(s, store.get_dataset(s, "demo").id)
               if r["example_id"] == "q-0001" and r["criterion"] == "concise"][0]["value"]
        store.upsert_labels(s, [{"example_id": ex, "criterion": "concise", "annotator": "reference",
                                 "value": 1 - old}])
    with Session(engine) as s:
        after = reports.load_human(s, "demo")
        j = [c.key for c in after.criteria].index("concise")
        assert after.binary[0, j] == 1 - old and before[0, j] == old
