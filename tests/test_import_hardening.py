"""Imports and exports against inputs the malformed corpus did not hold — each refused in one line naming
file, line and field, with nothing written, the same on SQLite and PostgreSQL; and exports that read back
exactly.

Every file is generated here (the shapes are the point: 100 000 brackets, a 5000-digit number, a YAML
alias bomb) and imported through the real CLI into the real database."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import imports, labeling, store
from tests.conftest import DATA

BACKENDS = ("sqlite", "postgresql")
GOOD = DATA / "good"
NFC_ID, NFD_ID = "caf\u00e9-1", "cafe\u0301-1"


def counts(engine) -> dict[str, int]:
    with Session(engine) as s:
        return store.row_counts(s)


def refused(cli, engine, args: list, *expected: str) -> str:
    """Run a command that must be refused: exit 2, one line on stderr holding every ``expected`` part, no row
    written. Returns the line."""
    before = counts(engine)
    result = cli(*args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for part in expected:
        assert part in lines[0], lines[0]
    assert counts(engine) == before
    return lines[0]


def jsonl(path, *records) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------------ identifiers


def test_ids_differing_only_in_unicode_normalisation_are_duplicates(cli, engine, tmp_path):
    path = jsonl(tmp_path / "ids.jsonl", {"id": NFC_ID, "answer": "a"}, {"id": NFD_ID, "answer": "b"})
    refused(cli, engine, ["import-dataset", path, "--name", "x"], "ids.jsonl:2: field 'id': duplicate id",
            "first on line 1", "NFC")


def test_labels_and_runs_naming_an_id_in_another_normalisation_find_the_example(cli, engine, tmp_path):
    assert cli("import-dataset", jsonl(tmp_path / "d.jsonl", {"id": NFD_ID, "answer": "a"}),
               "--name", "d").exit_code == 0
    assert cli("import-rubric", GOOD / "rubric.yaml").exit_code == 0
    labels = jsonl(tmp_path / "l.jsonl", {"example_id": NFC_ID, "criterion": "safety", "value": 4, "annotator": "ana"})
    result = cli("import-labels", labels, "--dataset", "d")
    assert result.exit_code == 0, result.stderr
    run = jsonl(tmp_path / "r.jsonl", {"example_id": NFC_ID, "criterion": "safety", "verdict": 3})
    assert cli("import-run", run, "--dataset", "d", "--rubric", "support", "--name", "x").exit_code == 0
    with Session(engine) as s:
        assert s.scalars(select(store.Example.ext_id)).all() == [NFC_ID]  # stored normalised
        assert s.scalar(select(store.Label.value)) == 4


# -------------------------------------------------------------------------------- one clear line


def test_deeply_nested_metadata_is_one_line_naming_the_field(cli, engine, tmp_path):
    deep = '{"id": "x", "answer": "a", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"
    refused(cli, engine, ["import-dataset", jsonl(tmp_path / "deep.jsonl", deep), "--name", "x"],
            "deep.jsonl:1:", "nested")
    moderately = {"id": "x", "answer": "a", "meta": json.loads("[" * 300 + "]" * 300)}  # orjson reads it
    refused(cli, engine, ["import-dataset", jsonl(tmp_path / "d300.jsonl", moderately), "--name", "x"],
            "d300.jsonl:1: field 'meta': nested more than 64 levels deep")


def test_lone_surrogates_nul_escapes_and_huge_integers_are_one_line(cli, engine, tmp_path):
    cases = {
        "surrogate.jsonl": ('{"id": "x", "answer": "half a pair \\ud800 here"}', "field 'answer'", "lone surrogate"),
        "meta_surrogate.jsonl": ('{"id": "x", "answer": "a", "note": "\\udfff"}', "field 'note'", "lone surrogate"),
        "nul.jsonl": ('{"id": "x", "answer": "a\\u0000b"}', "field 'answer'", "NUL"),
        "digits.jsonl": ('{"id": ' + "7" * 5000 + ', "answer": "a"}', "digits.jsonl:1:", "more than 4300 digits"),
        "wide_int.jsonl": ('{"id": ' + "7" * 1000 + ', "answer": "a"}', "field 'id'", "beyond 64 bits"),
    }
    for name, (line, *expected) in cases.items():
        refused(cli, engine, ["import-dataset", jsonl(tmp_path / name, line), "--name", "x"], f"{name}:1:", *expected)


def test_yaml_mapping_with_an_unhashable_key_is_one_line(cli, engine, tmp_path):
    path = tmp_path / "unhashable.yaml"
    path.write_text("name: r\ncriteria:\n  - key: a\n    question: q\n    ? [x, y]\n    : z\n")
    refused(cli, engine, ["import-rubric", path], "unhashable.yaml:5:", "mapping key must be text")
    mapping_key = tmp_path / "mapping_key.yaml"
    mapping_key.write_text("name: r\n? {a: 1}\n: 2\ncriteria: []\n")
    refused(cli, engine, ["import-rubric", mapping_key], "mapping_key.yaml:2:", "mapping key must be text")


def test_yaml_surrogates_nul_and_huge_numbers_in_a_rubric_are_one_line(cli, engine, tmp_path):
    for name, body, expected in [
        ("sur.yaml", 'name: r\ncriteria:\n  - key: a\n    question: "\\ud800"\n', "lone surrogate"),
        ("nul.yaml", 'name: "r\\0"\ncriteria:\n  - key: a\n    question: q\n', "NUL"),
        ("big.yaml", "name: r\ncriteria:\n  - key: a\n    question: q\n    pass_at: " + "9" * 5000 + "\n",
         "more than 4300 digits"),
        ("deep.yaml", "name: r\ndescription: " + "[" * 50_000 + "]" * 50_000 + "\ncriteria: []\n", "nested"),
    ]:
        (tmp_path / name).write_text(body)
        refused(cli, engine, ["import-rubric", tmp_path / name], name, expected)


def alias_bomb(levels: int) -> str:
    """A rubric whose free-text description is a "billion laughs": ``levels`` nested lists of ten aliases of the
    list below (10**levels values once expanded), all defined inside the description itself."""
    lists = ['&a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lists += [f"&a{k} [" + ", ".join([f"*a{k - 1}"] * 10) + "]" for k in range(1, levels + 1)]
    return "name: bomb\ncriteria:\n  - key: a\n    question: q\ndescription: [" + ", ".join(lists) + "]\n"


def test_yaml_alias_bomb_is_refused_unexpanded_with_bounded_memory(cli, engine, tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(7))  # 10 million values (the had a billion: refused just the same)
    tracemalloc.start()
    try:
        refused(cli, engine, ["import-rubric", path], "bomb.yaml", "alias")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30 * 1024 * 1024  # 10^9 expanded values were never built
    loop = tmp_path / "loop.yaml"
    loop.write_text("name: r\ncriteria: &c\n  - key: a\n    question: q\n    more: *c\n")
    refused(cli, engine, ["import-rubric", loop], "loop.yaml")


# --------------------------------------------------------------------------------- JSON is JSON


def test_json_rubric_is_parsed_as_json(cli, engine, tmp_path):
    text = '{\n\t"name": "judge \\ud83d\\ude00",\n\t"criteria": [\n\t\t{"key": "a", "question": "A?"}\n\t]\n}\n'
    (tmp_path / "tabs.json").write_text(text)
    result = cli("import-rubric", tmp_path / "tabs.json")
    assert result.exit_code == 0, result.stderr
    with Session(engine) as s:
        assert store.load_rubric(s, "judge \U0001f600").keys == ["a"]
    (tmp_path / "dup.json").write_text('{"name": "d",\n "criteria": [\n  {"key": "a", "question": "A?", "key": "b"}\n ]}')
    refused(cli, engine, ["import-rubric", tmp_path / "dup.json"], "dup.json:3: field 'key': duplicate key")
    (tmp_path / "kind.json").write_text('{"name": "k",\n "criteria": [\n  {"key": "a", "question": "A?",\n'
                                        '   "kind": "ternary"}\n ]}')
    refused(cli, engine, ["import-rubric", tmp_path / "kind.json"], "kind.json:3: field 'kind'")


def test_a_json_dataset_holding_an_array_is_read_as_that_array(cli, engine, tmp_path):
    (tmp_path / "arr.json").write_text('[\n  {"id": "a", "answer": "x"},\n  {"id": "b", "answer": "y"}\n]\n')
    result = cli("import-dataset", tmp_path / "arr.json", "--name", "arr")
    assert result.exit_code == 0, result.stderr
    with Session(engine) as s:
        assert sorted(store.example_ids(s, store.get_dataset(s, "arr").id)) == ["a", "b"]
    (tmp_path / "nul.json").write_text('[\n  {"id": "a", "answer": "x"},\n  {"id": "b", "answer": "a\\u0000b"}\n]')
    refused(cli, engine, ["import-dataset", tmp_path / "nul.json", "--name", "n"], "nul.json:3: field 'answer'", "NUL")
    (tmp_path / "gap.json").write_text('[\n  {"id": "a", "answer": "x"}\n  {"id": "b", "answer": "y"}\n]')
    refused(cli, engine, ["import-dataset", tmp_path / "gap.json", "--name", "g"], "gap.json:3:", "expected ',' or ']'")
    (tmp_path / "num.json").write_text('[{"id": "a", "answer": "x"}, 3]')
    refused(cli, engine, ["import-dataset", tmp_path / "num.json", "--name", "m"], "num.json:1:",
            "expected a JSON object, got int")


# ------------------------------------------------------------------------------------------ CSV


def test_csv_fields_up_to_the_documented_limit_are_accepted(cli, engine, tmp_path):
    long_answer = "word " * 60_000  # 300 KB: over Python's csv default of 128 KiB
    (tmp_path / "long.csv").write_text(f'id,answer\nq1,"{long_answer}"\n', encoding="utf-8")
    result = cli("import-dataset", tmp_path / "long.csv", "--name", "long")
    assert result.exit_code == 0, result.stderr
    with Session(engine) as s:
        assert s.scalar(select(store.Example.answer)) == long_answer
    (tmp_path / "huge.csv").write_text('id,answer\nq1,"' + "x" * 1_000_001 + '"\n', encoding="utf-8")
    refused(cli, engine, ["import-dataset", tmp_path / "huge.csv", "--name", "huge"],
            "huge.csv:2:", "longer than 1000000 characters")


# ------------------------------------------------------------------------------ exports read back


TRICKY = ["'quoted", "'=1+1", "''", "-1 point", "=SUM(A1)", "@home", "+44", "'-x", "'@y", "plain", "\ttabbed"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_label_export_then_import_reads_back_exactly(cli, engine, tmp_path, suffix):
    ids = [f"{t}-id" if i % 2 else t + "x" for i, t in enumerate(TRICKY)]
    assert cli("import-dataset", jsonl(tmp_path / "d.jsonl", *({"id": i, "answer": "a"} for i in ids)),
               "--name", "d").exit_code == 0
    assert cli("import-rubric", GOOD / "rubric.yaml").exit_code == 0
    rows = [{"example_id": i, "criterion": "safety", "value": 1 + n % 5, "annotator": TRICKY[n] + "ann",
             "note": TRICKY[-1 - n] + ("\r", "\ra\r", "\r\n", "")[n % 4]} for n, i in enumerate(ids)]  # lone CRs
    assert cli("import-labels", jsonl(tmp_path / "in.jsonl", *rows), "--dataset", "d").exit_code == 0

    def stored():
        with Session(engine) as s:
            ds = store.get_dataset(s, "d")
            return sorted((r["example_id"], r["criterion"], r["annotator"], r["value"], r["note"])
                          for r in store.labels_for_dataset(s, ds.id))

    before = stored()
    out = tmp_path / f"labels{suffix}"
    assert cli("export-labels", "--dataset", "d", "--out", out).exit_code == 0
    if suffix == ".csv":
        for line in out.read_text().splitlines()[1:]:
            assert not line.startswith(("=", "+", "-", "@"))  # still safe to open in a spreadsheet
    result = cli("import-labels", out, "--dataset", "d")
    assert result.exit_code == 0, result.stderr
    assert stored() == before  # same annotators, values and notes: nothing added, nothing changed


def test_export_of_a_key_shared_by_a_binary_and_a_scale_rubric_writes_the_stored_values(cli, engine, tmp_path):
    assert cli("import-dataset", jsonl(tmp_path / "d.jsonl", {"id": "e1", "answer": "a"}, {"id": "e2", "answer": "b"}),
               "--name", "d").exit_code == 0
    (tmp_path / "bin.yaml").write_text("name: bin\ncriteria:\n  - key: tone\n    question: Polite?\n")
    (tmp_path / "sc.yaml").write_text("name: sc\ncriteria:\n  - key: tone\n    question: How polite?\n    kind: scale\n"
                                      "    levels: {1: a, 2: b, 3: c, 4: d, 5: e}\n")
    assert cli("import-rubric", tmp_path / "bin.yaml").exit_code == 0
    assert cli("import-rubric", tmp_path / "sc.yaml").exit_code == 0
    # a file's labels for such a key are refused, whichever rubric is named: each would read them differently
    for rubric in ("bin", "sc", None):
        refused(cli, engine, ["import-labels", jsonl(tmp_path / "b.jsonl", {"example_id": "e2", "criterion": "tone",
                                                                           "value": True}),
                              "--dataset", "d", "--annotator", "ana", *(["--rubric", rubric] if rubric else [])],
                "b.jsonl:1: field 'criterion': criterion 'tone' is defined differently by the rubrics "
                "(binary in bin; scale (pass at 3) in sc)")
    with Session(engine) as s, s.begin():  # labels written before the second rubric came (or by hand)
        ids = store.example_ids(s, store.get_dataset(s, "d").id)
        store.upsert_labels(s, [{"example_id": ids["e1"], "criterion": "tone", "annotator": "ana", "value": 4,
                                 "note": None},
                                {"example_id": ids["e2"], "criterion": "tone", "annotator": "ana", "value": 1,
                                 "note": None}])
    assert cli("export-labels", "--dataset", "d", "--out", tmp_path / "out.jsonl").exit_code == 0
    values = {r["example_id"]: r["value"] for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert values == {"e1": 4, "e2": 1}  # the stored numbers, never True for a score of 4
    assert cli("export-labels", "--dataset", "d", "--out", tmp_path / "out.csv").exit_code == 0
    csv_values = [line.split(",")[2] for line in (tmp_path / "out.csv").read_text().splitlines()[1:]]
    assert sorted(csv_values) == ["1", "4"]



def test_the_label_page_refuses_a_key_rubrics_define_differently_as_imports_do(cli, engine, tmp_path):
    assert cli("import-dataset", jsonl(tmp_path / "d.jsonl", {"id": "e1", "answer": "a"}), "--name", "d").exit_code == 0
    (tmp_path / "bin.yaml").write_text("name: bin\ncriteria:\n  - key: tone\n    question: Polite?\n"
                                      "  - key: safe\n    question: Safe?\n")
    assert cli("import-rubric", tmp_path / "bin.yaml").exit_code == 0
    with Session(engine) as s, s.begin():  # one rubric: tone can be labelled
        e1 = store.example_ids(s, store.get_dataset(s, "d").id)["e1"]
        bin_criteria = store.load_rubric(s, "bin").criteria
        assert labeling.save_item(s, e1, "ana", {"tone": 1, "safe": 1}, bin_criteria) == 2
    (tmp_path / "sc.yaml").write_text("name: sc\ncriteria:\n  - key: tone\n    question: How polite?\n    kind: scale\n"
                                      "    levels: {1: a, 2: b, 3: c, 4: d, 5: e}\n")
    assert cli("import-rubric", tmp_path / "sc.yaml").exit_code == 0
    with Session(engine) as s:
        with pytest.raises(ValueError, match=r"criterion 'tone' is defined differently by the rubrics \(binary in bin; "
                                             r"scale \(pass at 3\) in sc\).*; nothing was saved"):
            labeling.save_item(s, e1, "ana", {"safe": 0, "tone": 0}, bin_criteria)
        s.rollback()
        # nothing of the item was written, not even the criterion that is fine on its own
        assert {(r["criterion"], r["value"]) for r in store.labels_for_dataset(s, store.get_dataset(s, "d").id)} == {
            ("tone", 1), ("safe", 1)}
    with Session(engine) as s, s.begin():
        assert labeling.save_item(s, e1, "ana", {"safe": 0}, bin_criteria) == 1  # other keys still save


# ------------------------------------------------------------------------- the same on both stores


def test_over_long_names_are_refused_in_one_line_on_both_stores(cli, engine, tmp_path, monkeypatch):
    long = "n" * 201
    refused(cli, engine, ["import-dataset", GOOD / "dataset.jsonl", "--name", long], "field '--name'",
            "201 characters; the limit is 200")
    (tmp_path / "r.yaml").write_text(f"name: {long}\ncriteria:\n  - key: a\n    question: q\n")
    refused(cli, engine, ["import-rubric", tmp_path / "r.yaml"], "r.yaml:1: field 'name'", "the limit is 200")
    assert cli("import-dataset", GOOD / "dataset.jsonl", "--name", "base").exit_code == 0
    assert cli("import-rubric", GOOD / "rubric.yaml").exit_code == 0
    labels = jsonl(tmp_path / "l.jsonl", {"example_id": "q-001", "criterion": "safety", "value": 3, "annotator": long})
    refused(cli, engine, ["import-labels", labels, "--dataset", "base"], "l.jsonl:1: field 'annotator'")
    run = jsonl(tmp_path / "x.jsonl", {"example_id": "q-001", "criterion": "safety", "verdict": 3})
    refused(cli, engine, ["import-run", run, "--dataset", "base", "--rubric", "support", "--name", long],
            "field '--name'")
    refused(cli, engine, ["run", "--dataset", "base", "--rubric", "support", "--base-url", "http://127.0.0.1:9/v1",
                          "--model", "m" * 201, "--judge-kind", "openai"], "name is 201 characters; the limit is 200")


def test_nul_in_an_import_is_refused_in_one_line_on_both_stores(cli, engine, tmp_path):
    assert cli("import-dataset", GOOD / "dataset.jsonl", "--name", "base").exit_code == 0
    assert cli("import-rubric", GOOD / "rubric.yaml").exit_code == 0
    labels = jsonl(tmp_path / "l.jsonl", {"example_id": "q-001", "criterion": "safety", "value": 3,
                                          "annotator": "ana", "note": "a\u0000b"})
    refused(cli, engine, ["import-labels", labels, "--dataset", "base"], "l.jsonl:1: field 'note'", "NUL")
    run = jsonl(tmp_path / "x.jsonl", {"example_id": "q-001", "criterion": "safety", "verdict": 3,
                                       "rationale": "x\u0000y"})
    refused(cli, engine, ["import-run", run, "--dataset", "base", "--rubric", "support", "--name", "x"],
            "x.jsonl:1: field 'rationale'", "NUL")


def test_library_import_paths_refuse_the_same_way(engine, tmp_path):
    """The Data page calls these directly: the same InputError, nothing written."""
    from judgekit.datasets import InputError

    path = jsonl(tmp_path / "nul.jsonl", {"id": "x", "answer": "a\u0000"})
    with pytest.raises(InputError, match=r"nul.jsonl:1: field 'answer': contains a NUL"), \
            Session(engine) as s, s.begin():
        imports.import_dataset(s, path, "x")
    assert counts(engine)["examples"] == 0
