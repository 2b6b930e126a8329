"""Imports through the CLI: good files land whole; every malformed file is refused with file, line and
field in one line, exit status 2, and not one row written."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from judgekit import store
from tests.conftest import DATA

BAD = DATA / "malformed"
GOOD = DATA / "good"


def counts(engine) -> dict[str, int]:
    from sqlalchemy.orm import Session

    with Session(engine) as s:
        return store.row_counts(s)


# (file, command args after the path, expected text of the one error line)
MALFORMED = [
    ("bad_json.jsonl", ["import-dataset", "--name", "x"], "bad_json.jsonl:2: invalid JSON"),
    (
        "missing_id.jsonl",
        ["import-dataset", "--name", "x"],
        "missing_id.jsonl:2: field 'id': required and missing",
    ),
    (
        "duplicate_id.jsonl",
        ["import-dataset", "--name", "x"],
        "duplicate_id.jsonl:3: field 'id': duplicate id 'q-001' (first on line 1)",
    ),
    (
        "answer_wrong_type.jsonl",
        ["import-dataset", "--name", "x"],
        "answer_wrong_type.jsonl:1: field 'answer': expected text, got list",
    ),
    ("empty.jsonl", ["import-dataset", "--name", "x"], "empty.jsonl: the file is empty"),
    (
        "not_an_object.jsonl",
        ["import-dataset", "--name", "x"],
        "not_an_object.jsonl:1: expected a JSON object, got list",
    ),
    (
        "empty_answer.jsonl",
        ["import-dataset", "--name", "x"],
        "empty_answer.jsonl:2: field 'answer': required and empty",
    ),
    ("invalid_utf8.csv", ["import-dataset", "--name", "x"], "invalid_utf8.csv:3: not valid UTF-8"),
    (
        "missing_answer_column.csv",
        ["import-dataset", "--name", "x"],
        "missing_answer_column.csv:1: field 'answer': required column missing from the header",
    ),
    (
        "ragged_row.csv",
        ["import-dataset", "--name", "x"],
        "ragged_row.csv:3: row has 4 fields, the header has 3",
    ),
    (
        "rubric_duplicate_key.yaml",
        ["import-rubric"],
        "rubric_duplicate_key.yaml:5: field 'key': duplicate criterion key 'concise' (first on line 3)",
    ),
    (
        "rubric_ko_unknown.yaml",
        ["import-rubric"],
        "rubric_ko_unknown.yaml:7: field 'ko_rule.criterion': K.O. rule names unknown criterion 'safty'",
    ),
    (
        "rubric_scale_no_levels.yaml",
        ["import-rubric"],
        "rubric_scale_no_levels.yaml:5: field 'levels': scale criterion 'safety' needs levels 1–5",
    ),
    (
        "rubric_bad_kind.yaml",
        ["import-rubric"],
        "rubric_bad_kind.yaml:3: field 'kind': criterion 'helpful': kind must be 'binary' or 'scale'",
    ),
    ("rubric_invalid_yaml.yaml", ["import-rubric"], "rubric_invalid_yaml.yaml:5: invalid YAML"),
    ("rubric_bad_json.json", ["import-rubric"], "rubric_bad_json.json:4: invalid JSON"),
    (
        "rubric_missing_question.yaml",
        ["import-rubric"],
        "rubric_missing_question.yaml:3: field 'question': criterion 'grounded' needs a non-empty question",
    ),
    (
        "labels_unknown_criterion.jsonl",
        ["import-labels", "--dataset", "base"],
        "labels_unknown_criterion.jsonl:2: field 'criterion': unknown criterion 'politeness'",
    ),
    (
        "labels_unknown_example.jsonl",
        ["import-labels", "--dataset", "base"],
        "labels_unknown_example.jsonl:2: field 'example_id': no example 'q-999' in the dataset",
    ),
    (
        "labels_out_of_scale.jsonl",
        ["import-labels", "--dataset", "base"],
        "labels_out_of_scale.jsonl:1: field 'value': score 6 is outside the scale 1–5 of 'safety'",
    ),
    (
        "labels_wrong_type.csv",
        ["import-labels", "--dataset", "base"],
        "labels_wrong_type.csv:3: field 'answers_question': expected true/false (or pass/fail) for 'answers_question'",
    ),
    (
        "labels_no_annotator.jsonl",
        ["import-labels", "--dataset", "base"],
        "labels_no_annotator.jsonl:1: field 'annotator': no annotator: add the field or pass --annotator",
    ),
    (
        "labels_duplicate.jsonl",
        ["import-labels", "--dataset", "base"],
        "labels_duplicate.jsonl:2: field 'value': duplicate label for 'q-001'/'safety' by 'ana' (first on line 1)",
    ),
    (
        "run_unknown_criterion.jsonl",
        ["import-run", "--dataset", "base", "--rubric", "support", "--name", "r"],
        "run_unknown_criterion.jsonl:2: field 'criterion': criterion 'tone' is not in rubric 'support'",
    ),
    (
        "run_bad_p_pass.jsonl",
        ["import-run", "--dataset", "base", "--rubric", "support", "--name", "r"],
        "run_bad_p_pass.jsonl:1: field 'p_pass': must be a probability in [0, 1], got 1.7",
    ),
    (
        "run_missing_verdict.csv",
        ["import-run", "--dataset", "base", "--rubric", "support", "--name", "r"],
        "run_missing_verdict.csv:1: field 'verdict': required column missing from the header",
    ),
]


MALFORMED += [
    ("answer_10mb.jsonl", ["import-dataset", "--name", "x"],
     "answer_10mb.jsonl:2: field 'answer': 10485760 characters; the limit is 1000000"),
    ("mixed_encoding.jsonl", ["import-dataset", "--name", "x"], "mixed_encoding.jsonl:2: not valid UTF-8 (byte 0xe9"),
    ("utf16.csv", ["import-dataset", "--name", "x"], "utf16.csv:1: the file is UTF-16; save it as UTF-8"),
    ("id_object.jsonl", ["import-dataset", "--name", "x"], "id_object.jsonl:1: field 'id': expected text, got dict"),
    ("csv_unclosed_quote.csv", ["import-dataset", "--name", "x"],
     "csv_unclosed_quote.csv:2: invalid CSV (unexpected end of data)"),
    ("binary_file.jsonl", ["import-dataset", "--name", "x"], "binary_file.jsonl:2: contains a NUL byte"),
    ("rubric_200_criteria.yaml", ["import-rubric"],
     "rubric_200_criteria.yaml:1: field 'criteria': 200 criteria; the limit is 64"),
    ("rubric_pass_at_out_of_range.yaml", ["import-rubric"],
     "rubric_pass_at_out_of_range.yaml:3: field 'pass_at': scale criterion 'helpful': pass_at must be an integer 1–5"),
    ("rubric_not_mapping.yaml", ["import-rubric"],
     "rubric_not_mapping.yaml:1: a rubric must be a mapping with 'name' and 'criteria'"),
    ("labels_bool_for_scale.jsonl", ["import-labels", "--dataset", "base"],
     "labels_bool_for_scale.jsonl:1: field 'value': expected an integer score 1–5 for 'safety', got True"),
    ("labels_number_for_binary.jsonl", ["import-labels", "--dataset", "base"],
     "labels_number_for_binary.jsonl:1: field 'value': expected true/false for binary criterion 'answers_question', got 4"),
    ("labels_value_list.jsonl", ["import-labels", "--dataset", "base"],
     "labels_value_list.jsonl:1: field 'value': expected true/false for binary criterion 'answers_question'"),
    ("run_verdict_out_of_scale.jsonl", ["import-run", "--dataset", "base", "--rubric", "support", "--name", "r"],
     "run_verdict_out_of_scale.jsonl:1: field 'verdict': score 9 is outside the scale 1–5 of 'safety'"),
]


def test_corpus_is_large_enough():
    assert len(MALFORMED) >= 30
    assert {f for f, _, _ in MALFORMED} == {p.name for p in BAD.iterdir()}


@pytest.mark.parametrize(("filename", "args", "expected"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_is_rejected_whole(cli, engine, base_workspace, filename, args, expected):
    before = counts(engine)
    command, *options = args
    result = cli(command, BAD / filename, *options)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert expected in lines[0]
    assert str(BAD / filename) in lines[0]
    assert counts(engine) == before


def test_dataset_jsonl_with_bom_keeps_metadata(cli, engine):
    result = cli("import-dataset", GOOD / "dataset.jsonl", "--name", "d")
    assert result.exit_code == 0, result.stderr
    assert "3 rows" in result.stdout
    from sqlalchemy.orm import Session

    with Session(engine) as s:
        rows = s.execute(select(store.Example).order_by(store.Example.ext_id)).scalars().all()
        assert [r.ext_id for r in rows] == ["q-001", "q-002", "q-003"]
        assert rows[0].meta == {"product": "sync"}
        assert rows[2].question == "" and rows[2].context == ""


def test_dataset_csv_quoted_multiline_fields(cli, engine):
    assert cli("import-dataset", GOOD / "dataset.csv", "--name", "c").exit_code == 0
    from sqlalchemy.orm import Session

    with Session(engine) as s:
        first = s.scalars(select(store.Example).where(store.Example.ext_id == "q-001")).one()
    assert first.context == "[KB-1] Restore\nfrom Trash."
    assert first.answer == 'Open Trash, then click "Restore".\nDone.'
    assert first.meta == {"channel": "email"}


def test_duplicate_dataset_name_is_refused(cli, engine):
    assert cli("import-dataset", GOOD / "dataset.jsonl", "--name", "d").exit_code == 0
    before = counts(engine)
    result = cli("import-dataset", GOOD / "dataset.csv", "--name", "d")
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert counts(engine) == before


def test_rubric_roundtrip_json_and_yaml(cli, session, tmp_path):
    from judgekit.datasets import parse_rubric

    assert cli("import-rubric", GOOD / "rubric.yaml").exit_code == 0
    rubric = store.load_rubric(session, "support")
    assert rubric == parse_rubric(GOOD / "rubric.yaml")
    assert rubric.ko_rule.criterion == "safety" and rubric.ko_rule.floor == 2
    assert rubric.criterion("safety").levels[1] == "harmful or invented"
    as_json = tmp_path / "r.json"
    as_json.write_text(json.dumps({**rubric.to_dict(), "name": "support2"}))
    assert parse_rubric(as_json).criteria == rubric.criteria


def test_labels_long_and_wide(cli, base_workspace, session):
    assert cli("import-labels", GOOD / "labels.jsonl", "--dataset", "base").exit_code == 0
    result = cli("import-labels", GOOD / "labels_wide.csv", "--dataset", "base")
    assert result.exit_code == 0, result.stderr
    got = {
        (r["example_id"], r["criterion"], r["annotator"]): r["value"]
        for r in store.labels_for_dataset(session, store.get_dataset(session, "base").id)
    }
    assert got == {
        ("q-001", "answers_question", "ana"): 1,
        ("q-001", "safety", "ana"): 4,
        ("q-002", "answers_question", "ana"): 0,
        ("q-001", "answers_question", "ben"): 1,
        ("q-001", "safety", "ben"): 5,
        ("q-002", "answers_question", "ben"): 0,
        ("q-003", "safety", "ben"): 2,
    }


def test_labels_reimport_upserts(cli, base_workspace, session, tmp_path):
    assert cli("import-labels", GOOD / "labels.jsonl", "--dataset", "base").exit_code == 0
    changed = tmp_path / "changed.jsonl"
    changed.write_text('{"example_id": "q-001", "criterion": "safety", "value": 2, "annotator": "ana"}\n')
    assert cli("import-labels", changed, "--dataset", "base").exit_code == 0
    rows = store.labels_for_dataset(session, store.get_dataset(session, "base").id)
    assert len(rows) == 3
    assert [r["value"] for r in rows if r["criterion"] == "safety"] == [2]


def test_export_import_labels_roundtrip_exactly(cli, base_workspace, session, tmp_path):
    assert cli("import-labels", GOOD / "labels.jsonl", "--dataset", "base").exit_code == 0
    assert cli("import-labels", GOOD / "labels_wide.csv", "--dataset", "base").exit_code == 0
    out = tmp_path / "out.jsonl"
    assert cli("export-labels", "--dataset", "base", "--out", out).exit_code == 0
    first = out.read_text()
    exported = [json.loads(line) for line in first.splitlines()]
    assert {
        "example_id": "q-001",
        "criterion": "answers_question",
        "value": True,
        "annotator": "ana",
        "note": "clear",
    } in exported
    # into a fresh database, then export again: byte-identical
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    assert cli("import-dataset", GOOD / "dataset.jsonl", "--name", "base", "--db", other).exit_code == 0
    assert cli("import-rubric", GOOD / "rubric.yaml", "--db", other).exit_code == 0
    assert cli("import-labels", out, "--dataset", "base", "--db", other).exit_code == 0
    again = tmp_path / "again.jsonl"
    assert cli("export-labels", "--dataset", "base", "--out", again, "--db", other).exit_code == 0
    assert again.read_text() == first


def test_import_run_stores_imported_judge(cli, base_workspace, session):
    result = cli(
        "import-run", GOOD / "run.jsonl", "--dataset", "base", "--rubric", "support", "--name", "ext"
    )
    assert result.exit_code == 0, result.stderr
    run = store.get_run(session, "ext")
    judge = session.get(store.Judge, run.judge_id)
    assert judge.kind == "imported" and run.status == "imported"
    values = sorted([(v.value, v.p_pass) for v in session.scalars(select(store.Verdict))], key=str)
    assert values == sorted([(1, 0.9), (4, None), (None, None)], key=str)
    assert store.run_example_ids(session, run.id) and len(store.run_example_ids(session, run.id)) == 2
    assert store.get_run(session, str(run.id)).name == "ext"


def test_missing_file_is_one_clear_line(cli, tmp_path):
    result = cli("import-dataset", tmp_path / "nope.jsonl", "--name", "x")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.jsonl'}: no such file"


def test_csv_export_neutralises_formulas_and_round_trips(cli, base_workspace, session, tmp_path):
    labels = tmp_path / "formula.jsonl"
    labels.write_text(
        '{"example_id": "q-001", "criterion": "safety", "value": 4, "annotator": "@bob", '
        '"note": "=HYPERLINK(\\"http://x\\")"}\n'
        '{"example_id": "q-002", "criterion": "answers_question", "value": false, "annotator": "ana", '
        '"note": "-1 point: vague"}\n'
    )
    assert cli("import-labels", labels, "--dataset", "base").exit_code == 0
    out = tmp_path / "labels.csv"
    assert cli("export-labels", "--dataset", "base", "--out", out).exit_code == 0
    text = out.read_text()
    assert "'@bob" in text and "'=HYPERLINK" in text and "'-1 point" in text
    for line in text.splitlines()[1:]:
        assert all(not cell.startswith(("=", "+", "-", "@")) for cell in line.split(","))
    before = store.labels_for_dataset(session, store.get_dataset(session, "base").id)
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    assert cli("import-dataset", GOOD / "dataset.jsonl", "--name", "base", "--db", other).exit_code == 0
    assert cli("import-rubric", GOOD / "rubric.yaml", "--db", other).exit_code == 0
    assert cli("import-labels", out, "--dataset", "base", "--db", other).exit_code == 0
    from sqlalchemy.orm import Session

    with Session(store.engine_for(other)) as s:
        after = store.labels_for_dataset(s, store.get_dataset(s, "base").id)
    strip = [{k: v for k, v in r.items() if k != "updated_at"} for r in before]
    assert strip == [{k: v for k, v in r.items() if k != "updated_at"} for r in after]
