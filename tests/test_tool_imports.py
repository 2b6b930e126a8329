"""`judgekit import-run --from promptfoo|inspect|autorubric|langfuse`: files the real tools wrote (committed
under tests/data/tools, see its README) land as runs whose verdicts, unscored rows, calls and tokens are
the files' own — counted here straight from each file, not through judgekit's parser; the runs take part
in `report compare`, `report agreement` and `report phi` like any other; malformed variants of each file
are refused whole with one line, on SQLite and on PostgreSQL; and the value and matching rules hold."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import reports, sources, store, tool_formats
from judgekit.datasets import InputError
from judgekit.rubric import Criterion, Rubric
from tests.conftest import DATA

BACKENDS = ("sqlite", "postgresql")
TOOLS = DATA / "tools"
PF = TOOLS / "promptfoo"
INS = TOOLS / "inspect"
AR = TOOLS / "autorubric"
LF = TOOLS / "langfuse"
SLICE = json.loads((TOOLS / "slice.json").read_text())
SLICE_IDS = [e["id"] for e in SLICE["examples"]]


# ----------------------------------------------------------------------------- the files' own verdicts
# Each returns {(example id, criterion): 1 | 0 | level | None} read directly from the tool's file.


def promptfoo_expected(path: Path) -> dict:
    out = {}
    for r in json.loads(path.read_text())["results"]["results"]:
        for comp in r["gradingResult"]["componentResults"]:
            key = comp["assertion"]["metric"]
            if comp.get("metadata", {}).get("graderError"):
                value = None
            elif comp["assertion"]["type"] == "g-eval" and "scale" in path.name:
                value = None  # g-eval scores are 0–1: never a 1–5 level
            elif "scale" in path.name:
                value = int(comp["score"])
            else:
                value = int(comp["pass"])
            out[(r["vars"]["example_id"], key)] = value
    return out


def inspect_expected(path: Path) -> dict:
    out = {}
    for s in json.loads(path.read_text())["samples"]:  # the stdlib reads inspect's NaN
        for name, score in s["scores"].items():
            values = score["value"] if isinstance(score["value"], dict) else {name: score["value"]}
            for key, v in values.items():
                if isinstance(v, float) and math.isnan(v) or v is None:
                    out[(s["id"], key)] = None
                else:
                    out[(s["id"], key)] = {"C": 1, "I": 0}.get(v, v)
    return out


def autorubric_expected(run_dir: Path, dataset: Path) -> dict:
    items = json.loads(dataset.read_text())["items"]
    out = {}
    for line in (run_dir / "items.jsonl").read_text().splitlines():
        rec = json.loads(line)
        ex = items[rec["item_idx"]]["description"]
        for cr in rec["report"]["criterion_reports"]:
            choice = cr["final_multi_choice_verdict"]
            if cr["error"]:
                value = None
            elif choice is not None:
                value = int(choice["selected_label"][0])
            else:
                value = {"MET": 1, "UNMET": 0}[cr["final_verdict"]]
            out[(ex, cr["criterion"]["name"])] = value
    return out


def trace_ids() -> dict[str, str]:
    """Langfuse.create_trace_id(seed=id) of every slice id (sha256, first 16 bytes, hex)."""
    return {hashlib.sha256(i.encode()).digest()[:16].hex(): i for i in SLICE_IDS}


def langfuse_api_expected(path: Path) -> dict:
    words = {"pass": 1, "fail": 0}
    return {(trace_ids()[s["subject"]["id"]], s["name"]): words.get(s["value"]) if s["dataType"] == "CATEGORICAL"
            else int(s["value"]) for s in json.loads(path.read_text())["data"]}


def langfuse_csv_expected(path: Path) -> dict:
    out = {}
    for row in csv.DictReader(path.open(encoding="utf-8")):
        value = {"pass": 1, "fail": 0}.get(row["string_value"]) if row["data_type"] == "CATEGORICAL" \
            else int(row["value"])
        out[(trace_ids()[row["trace_id"]], row["name"])] = value
    return out


def langsmith_expected(path: Path) -> dict:
    out = {}
    for row in csv.DictReader(path.open(encoding="utf-8")):
        for key, cell in row.items():
            if key.startswith("feedback."):
                out[(row["inputs.example_id"], key.removeprefix("feedback."))] = {"True": 1, "False": 0}.get(cell)
    return out


# (run name, rubric, CLI args after `import-run`, expected verdicts)
GOOD = [
    ("pf", "demo", ["--from", "promptfoo", PF / "results.binary.json"], lambda: promptfoo_expected(PF / "results.binary.json")),
    ("pf-scale", "demo-scale", ["--from", "promptfoo", PF / "results.scale.json"],
     lambda: promptfoo_expected(PF / "results.scale.json")),
    ("ins", "demo", ["--from", "inspect", INS / "binary.json"], lambda: inspect_expected(INS / "binary.json")),
    ("ins-scale", "demo-scale", ["--from", "inspect", INS / "scale.json"], lambda: inspect_expected(INS / "scale.json")),
    ("ar", "demo", ["--from", "autorubric", AR / "demo-binary", "--tool-dataset", AR / "dataset.binary.json"],
     lambda: autorubric_expected(AR / "demo-binary", AR / "dataset.binary.json")),
    ("ar-scale", "demo-scale", ["--from", "autorubric", AR / "demo-scale" / "items.jsonl", "--tool-dataset",
                                AR / "dataset.scale.json"],
     lambda: autorubric_expected(AR / "demo-scale", AR / "dataset.scale.json")),
    ("lf", "demo", ["--from", "langfuse", LF / "scores.api.json"], lambda: langfuse_api_expected(LF / "scores.api.json")),
    ("lf-csv", "demo", ["--from", "langfuse", LF / "scores.blob.csv"], lambda: langfuse_csv_expected(LF / "scores.blob.csv")),
    ("ls", "demo", ["--from", "langfuse", LF / "experiment.langsmith.csv"],
     lambda: langsmith_expected(LF / "experiment.langsmith.csv")),
]


def stored_verdicts(engine, run_name: str) -> dict:
    with Session(engine) as s:
        run = store.get_run(s, run_name)
        q = (select(store.Example.ext_id, store.CriterionRow.key, store.Verdict.value)
             .join(store.Example, store.Example.id == store.Verdict.example_id)
             .join(store.CriterionRow, store.CriterionRow.id == store.Verdict.criterion_id)
             .where(store.Verdict.run_id == run.id))
        return {(ex, key): value for ex, key, value in s.execute(q)}


def import_good(cli, name: str):
    run, rubric, args, _ = next(g for g in GOOD if g[0] == name)
    return cli("import-run", *args, "--dataset", "demo", "--rubric", rubric, "--name", run)


@pytest.mark.parametrize("case", GOOD, ids=[g[0] for g in GOOD])
def test_each_tool_file_lands_with_its_own_verdicts(cli, engine, demo, case):
    name, rubric, _, expected = case
    result = import_good(cli, name)
    assert result.exit_code == 0, result.stderr
    want = expected()
    assert len(want) == 36  # 12 answers × 3 criteria in every fixture
    assert stored_verdicts(engine, name) == want
    unscored = sum(v is None for v in want.values())
    assert result.stdout.startswith(f"imported run '{name}': 36 rows (") and f"{unscored} unscored" in result.stdout
    with Session(engine) as s:
        run = store.get_run(s, name)
        judge = s.get(store.Judge, run.judge_id)
        assert judge.kind == "imported" and run.status == "imported"
        tool = {"pf": "promptfoo", "ins": "inspect", "ar": "autorubric", "lf": "langfuse", "ls": "langsmith"}
        assert judge.name.split()[0] == tool[name.split("-")[0]]
        covered = s.scalars(select(store.Example.ext_id).where(
            store.Example.id.in_(store.run_example_ids(s, run.id)))).all()
    assert sorted(covered) == SLICE_IDS


def test_tool_reasons_are_kept_and_a_grader_failure_is_unscored_not_a_fail(cli, engine, demo):
    assert import_good(cli, "pf").exit_code == 0
    with Session(engine) as s:
        run = store.get_run(s, "pf")
        rows = {(s.get(store.Example, v.example_id).ext_id, s.get(store.CriterionRow, v.criterion_id).key): v
                for v in s.scalars(select(store.Verdict).where(store.Verdict.run_id == run.id))}
    failed = rows[("q-0007", "concise")]
    assert failed.value is None and "not in JSON format" in failed.error  # promptfoo itself scored it a fail
    assert rows[("q-0001", "answers_question")].rationale == "The answer meets the answers_question requirement."


def test_scale_values_are_never_rescaled(cli, engine, demo):
    assert import_good(cli, "pf-scale").exit_code == 0
    stored = stored_verdicts(engine, "pf-scale")
    raw = {(r["vars"]["example_id"], c["assertion"]["metric"]): c["score"]
           for r in json.loads((PF / "results.scale.json").read_text())["results"]["results"]
           for c in r["gradingResult"]["componentResults"]}
    # g-eval's clarity scores are 0–1 (1.0 = fully met): read as levels they would say "level 1, confusing"
    assert {raw[(e, "clarity")] for e in SLICE_IDS} >= {1}
    assert all(stored[(e, "clarity")] is None for e in SLICE_IDS)
    assert all(stored[(e, "correctness")] == raw[(e, "correctness")] for e in SLICE_IDS)
    with Session(engine) as s:
        run = store.get_run(s, "pf-scale")
        errors = s.scalars(select(store.Verdict.error).where(store.Verdict.run_id == run.id,
                                                             store.Verdict.value.is_(None))).all()
    assert sum("not on the 1–5 scale" in e for e in errors) == 11 and len(errors) == 12  # + q-0007's grader error


def promptfoo_tokens(path: Path) -> tuple[int, int, int]:
    comps = [c for r in json.loads(path.read_text())["results"]["results"] for c in r["gradingResult"]["componentResults"]]
    return len(comps), sum(c["tokensUsed"]["prompt"] for c in comps), sum(c["tokensUsed"]["completion"] for c in comps)


def test_imported_runs_compare_with_costs_from_the_files(cli, demo):
    assert import_good(cli, "pf").exit_code == 0
    assert import_good(cli, "ar").exit_code == 0
    result = cli("report", "compare", "pf", "ar", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rep = json.loads(result.stdout)
    pf, ar = promptfoo_expected(PF / "results.binary.json"), autorubric_expected(AR / "demo-binary",
                                                                                 AR / "dataset.binary.json")
    for key in ("answers_question", "grounded", "concise"):
        both = [e for e in SLICE_IDS if pf[(e, key)] is not None and ar[(e, key)] is not None]
        assert rep["criteria"][key]["a_fail"] == sum(pf[(e, key)] == 0 for e in both)
        assert rep["criteria"][key]["b_fail"] == sum(ar[(e, key)] == 0 for e in both)
    calls, prompt, completion = promptfoo_tokens(PF / "results.binary.json")
    a, b = rep["cost"]["a"], rep["cost"]["b"]
    assert (a["calls"], a["prompt_tokens"], a["completion_tokens"]) == (calls, prompt, completion) == (36, 14510, 1047)
    # promptfoo records no grading cost: its tokens at gpt-4o-mini's list price ($0.15 / $0.60 per 1M)
    assert a["usd"] == pytest.approx((14510 * 0.15 + 1047 * 0.60) / 1e6)
    items = [json.loads(x) for x in (AR / "demo-binary" / "items.jsonl").read_text().splitlines()]
    assert b["calls"] == 12 and b["prompt_tokens"] == sum(i["report"]["token_usage"]["prompt_tokens"] for i in items)
    assert b["usd"] == pytest.approx(sum(i["report"]["completion_cost"] for i in items))  # autorubric's own
    assert "as the tool recorded it" in b["note"]
    assert a["failed_calls"] == 1  # promptfoo's grader error on q-0007 × concise


def test_the_compare_page_prices_imported_runs_like_report_compare(cli, engine, demo):
    from judgekit import ui

    for name in ("pf", "ar", "lf"):
        assert import_good(cli, name).exit_code == 0
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo")
        ws = ui.load_workspace(s, ds.id, sources.versions(s, ds.id), store.annotators_for_dataset(s, ds.id))
        costs = {n: reports.run_cost(s, store.get_run(s, n)) for n in ("pf", "ar", "lf")}
    frame = ui.cost_vs_agreement(ws).set_index("run")
    for n, cost in costs.items():
        assert frame.loc[n, "usd"] == pytest.approx(cost.usd)
        assert frame.loc[n, "calls"] == cost.calls
    assert costs["lf"].usd == 0.0 and costs["lf"].note == "imported run: no calls recorded"  # Langfuse: no usage


def test_imported_runs_in_agreement_and_phi(cli, demo):
    for name in ("ins", "lf", "ls"):
        assert import_good(cli, name).exit_code == 0
    ins = inspect_expected(INS / "binary.json")
    result = cli("report", "agreement", "--run", "ins", "--annotator", "reference", "--format", "json")
    assert result.exit_code == 0, result.stderr
    crits = json.loads(result.stdout)["criteria"]
    truth = {(t["example_id"], t["criterion"]): t["value"] for t in _truth()}
    for key in ("answers_question", "grounded", "concise"):
        scored = [e for e in SLICE_IDS if ins[(e, key)] is not None]
        assert crits[key]["n"] == len(scored)
        assert crits[key]["accuracy"] == pytest.approx(
            sum(ins[(e, key)] == truth[(e, key)] for e in scored) / len(scored))
    result = cli("report", "phi", "--run", "ins", "--run", "lf", "--run", "ls", "--format", "json")
    assert result.exit_code == 0, result.stderr
    cols = {c["source"]: c for c in json.loads(result.stdout)["columns"]}
    assert {"run:ins", "run:lf", "run:ls"} <= set(cols)
    assert all(cols[f"run:{n}"]["n"] == 12 for n in ("ins", "lf", "ls"))


def _truth():
    from judgekit import demo

    return demo.build_demo(n_examples=30).truth


# ----------------------------------------------------------------------------- malformed variants


def copy_of(tmp_path: Path, src: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    return dst


def truncated(tmp_path, src: Path, name: str) -> Path:
    dst = tmp_path / name
    raw = src.read_bytes()
    dst.write_bytes(raw[: len(raw) // 2])
    return dst


def edited_json(tmp_path, src: Path, name: str, edit) -> Path:
    doc = json.loads(src.read_text())
    edit(doc)
    dst = tmp_path / name
    dst.write_text(json.dumps(doc, indent=2))
    return dst


def edited_lines(tmp_path, src: Path, name: str, edit) -> Path:
    dst = tmp_path / name
    dst.write_text("\n".join(edit(src.read_text().splitlines())) + "\n")
    return dst


def autorubric_dir(tmp_path, name: str, edit) -> Path:
    d = copy_of(tmp_path, AR / "demo-binary", name)
    edited_lines(tmp_path, d / "items.jsonl", f"{name}/items.jsonl", edit)
    return d


def eval_zip(tmp_path) -> Path:
    """inspect-ai's default log format: a zip (header.json, samples/…)."""
    import zipfile

    dst = tmp_path / "log.eval"
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("header.json", json.dumps({"version": 2, "status": "success"}))
    return dst


def rename_metric(doc):
    doc["results"]["results"][2]["gradingResult"]["componentResults"][1]["assertion"]["metric"] = "politeness"


def rename_scorer(doc):
    doc["samples"][4]["scores"]["tone"] = doc["samples"][4]["scores"].pop("grounded")


def rename_criterion(lines):
    rec = json.loads(lines[3])
    rec["report"]["criterion_reports"][0]["criterion"]["name"] = "politeness"
    return [*lines[:3], json.dumps(rec), *lines[4:]]


def second_epoch(doc):
    doc["samples"].append({**doc["samples"][5], "epoch": 2})


AR_ARGS = ["--tool-dataset", AR / "dataset.binary.json"]
# (id, tool, make(tmp_path) -> path, extra args, text the one error line must contain — {p} is the path)
MALFORMED = [
    ("promptfoo-truncated", "promptfoo", lambda t: truncated(t, PF / "results.binary.json", "results.json"), [],
     "{p}:{line}: invalid JSON (the file ends early (truncated?)"),
    ("promptfoo-wrong-shape", "promptfoo", lambda t: INS / "binary.json", [],
     "{p}: not a promptfoo `eval -o results.json` file (no results.results list)"),
    ("promptfoo-unknown-criterion", "promptfoo",
     lambda t: edited_json(t, PF / "results.binary.json", "results.json", rename_metric), [],
     "{p}: field 'results.results[2].gradingResult.componentResults[1]': unknown criterion 'politeness'"),
    ("promptfoo-duplicate-sample", "promptfoo",
     lambda t: edited_json(t, PF / "results.binary.json", "results.json",
                           lambda d: d["results"]["results"].append(d["results"]["results"][4])), [],
     "{p}: field 'results.results[12].gradingResult.componentResults[0]': duplicate verdict for "
     "'q-0005'/'answers_question' (first at results.results[4].gradingResult.componentResults[0])"),
    ("promptfoo-unknown-example", "promptfoo",
     lambda t: edited_json(t, PF / "results.binary.json", "results.json",
                           lambda d: d["results"]["results"][0]["vars"].update(example_id="q-9999")), [],
     "{p}: field 'results.results[0].vars.example_id': no example 'q-9999' in the dataset"),
    ("promptfoo-other-answer", "promptfoo",
     lambda t: edited_json(t, PF / "results.binary.json", "results.json",
                           lambda d: d["results"]["results"][1]["vars"].update(answer="Something else.")), [],
     "{p}: field 'results.results[1].vars.example_id': the answer this tool judged differs from the stored "
     "answer of example 'q-0002'"),
    ("inspect-truncated", "inspect", lambda t: truncated(t, INS / "scale.json", "log.json"), [],
     "{p}:{line}: invalid JSON (the file ends early (truncated?)"),
    ("inspect-wrong-shape", "inspect", lambda t: PF / "results.binary.json", [],
     "{p}: not an inspect-ai eval log in JSON (no 'eval' object)"),
    ("inspect-unknown-criterion", "inspect", lambda t: edited_json(t, INS / "binary.json", "log.json", rename_scorer),
     [], "{p}: field 'samples[4].scores.tone': unknown criterion 'tone'"),
    ("inspect-duplicate-sample", "inspect", lambda t: edited_json(t, INS / "binary.json", "log.json", second_epoch),
     [], "{p}: field 'samples[12].scores.answers_question': duplicate verdict for 'q-0006'/'answers_question' "
         "(first at samples[5].scores.answers_question)"),
    ("inspect-eval-zip", "inspect", lambda t: eval_zip(t), [],
     "{p}: an inspect-ai .eval log: convert it with `inspect log convert PATH --to json`"),
    ("inspect-no-samples", "inspect",
     lambda t: edited_json(t, INS / "scale.json", "log.json", lambda d: d.pop("samples")), [],
     "{p}: field 'samples': the log has no samples (written with --no-log-samples?)"),
    ("autorubric-truncated", "autorubric",
     lambda t: autorubric_dir(t, "run", lambda ls: [*ls[:5], ls[5][: len(ls[5]) // 2]]), AR_ARGS,
     "{p}/items.jsonl:6: invalid JSON"),
    ("autorubric-wrong-shape", "autorubric", lambda t: copy_of(t, AR / "demo-binary", "run"),
     ["--tool-dataset", PF / "results.binary.json"],
     f"{PF / 'results.binary.json'}: field '--tool-dataset': not an autorubric dataset file"),
    ("autorubric-unknown-criterion", "autorubric", lambda t: autorubric_dir(t, "run", rename_criterion), AR_ARGS,
     "{p}/items.jsonl:4: field 'report.criterion_reports[0]': unknown criterion 'politeness'"),
    ("autorubric-duplicate-sample", "autorubric", lambda t: autorubric_dir(t, "run", lambda ls: [*ls, ls[0]]),
     AR_ARGS, "{p}/items.jsonl:13: field 'report.criterion_reports[0]': duplicate verdict for"),
    ("autorubric-no-dataset", "autorubric", lambda t: copy_of(t, AR / "demo-binary", "run"), [],
     "{p}/items.jsonl: field '--tool-dataset': autorubric names results by position only"),
    ("autorubric-other-dataset", "autorubric", lambda t: copy_of(t, AR / "demo-binary", "run"),
     ["--tool-dataset", AR / "dataset.scale.json"],
     f"{AR / 'dataset.scale.json'}: field '--tool-dataset': not the dataset this run graded"),
    ("langfuse-truncated", "langfuse", lambda t: truncated(t, LF / "scores.api.json", "scores.json"), [],
     "{p}:{line}: invalid JSON (the file ends early (truncated?)"),
    ("langfuse-wrong-shape", "langfuse", lambda t: PF / "results.binary.json", [],
     "{p}: expected a JSON list of rows, or an object with a 'data' list"),
    ("langfuse-unknown-criterion", "langfuse",
     lambda t: edited_lines(t, LF / "scores.blob.csv", "scores.csv",
                            lambda ls: [ls[0], ls[1].replace(",answers_question,", ",helpful,"), *ls[2:]]), [],
     "{p}:2: unknown criterion 'helpful'"),
    ("langfuse-duplicate-sample", "langfuse",
     lambda t: edited_json(t, LF / "scores.api.json", "scores.json", lambda d: d["data"].append(d["data"][7])), [],
     "{p}: field 'data[36]': duplicate verdict for 'q-0003'/'grounded' (first at data[7])"),
    ("langfuse-unmatched-trace", "langfuse",
     lambda t: edited_json(t, LF / "scores.api.json", "scores.json",
                           lambda d: [s["subject"].update(id="0" * 32) for s in d["data"][:6]]), [],
     "{p}: field 'data[0]': sample '00000000000000000000000000000000' matches no example of the dataset"),
    ("langfuse-nul-in-comment", "langfuse",
     lambda t: edited_json(t, LF / "scores.api.json", "scores.json", lambda d: d["data"][3].update(comment="a\x00b")),
     [], "{p}: field 'data[3].comment': contains a NUL character"),
    ("langfuse-lone-surrogate", "langfuse",
     lambda t: edited_json(t, LF / "scores.api.json", "scores.json",
                           lambda d: d["data"][5]["metadata"].update(note="a\ud800b")), [],
     "{p}: field 'data[5].metadata.note': contains a lone surrogate"),
    ("langsmith-unmatched-answer", "langfuse",
     lambda t: edited_lines(t, LF / "experiment.langsmith.csv", "experiment.csv",
                            lambda ls: [ls[0].replace("inputs.example_id", "inputs.ref"),
                                        ls[1].replace("Thanks for asking. ", ""), *ls[2:]]), [],
     "{p}:2: sample '2adf630c-d699-5cf4-9b0c-1dd8959d24ff' matches no example of the dataset"),
]


@pytest.mark.parametrize(("case", "tool", "make", "extra", "expected"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_tool_file_is_refused_whole(cli, engine, demo, tmp_path, case, tool, make, extra, expected):
    path = make(tmp_path)
    before = counts(engine)
    result = cli("import-run", "--from", tool, path, *extra, "--dataset", "demo", "--rubric", "demo", "--name", "x")
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = _truncation_line(path) if "{line}" in expected else None
    assert lines[0].startswith("error: ")
    assert expected.format(p=path, line=line) in lines[0], lines[0]
    assert counts(engine) == before


def _truncation_line(path: Path) -> int:
    return path.read_bytes().count(b"\n") + 1


def counts(engine) -> dict[str, int]:
    with Session(engine) as s:
        return store.row_counts(s)


def test_langsmith_rows_without_an_id_are_matched_by_answer_text(cli, engine, demo, tmp_path):
    # the id column renamed away: the stored answers themselves (outputs.answer) name the examples
    path = edited_lines(tmp_path, LF / "experiment.langsmith.csv", "experiment.csv",
                        lambda ls: [ls[0].replace("inputs.example_id", "inputs.ref"), *ls[1:]])
    result = cli("import-run", "--from", "langfuse", path, "--dataset", "demo", "--rubric", "demo", "--name", "ls")
    assert result.exit_code == 0, result.stderr
    assert stored_verdicts(engine, "ls") == langsmith_expected(LF / "experiment.langsmith.csv")


def test_unknown_tool_and_misplaced_tool_dataset_are_one_line(cli, demo):
    result = cli("import-run", "--from", "deepeval", PF / "results.binary.json", "--dataset", "demo", "--rubric",
                 "demo", "--name", "x")
    assert result.exit_code == 2
    assert "field '--from': unknown tool 'deepeval': use one of promptfoo, inspect, autorubric, langfuse" in result.stderr
    result = cli("import-run", "--from", "promptfoo", PF / "results.binary.json", "--tool-dataset",
                 AR / "dataset.binary.json", "--dataset", "demo", "--rubric", "demo", "--name", "x")
    assert result.exit_code == 2 and "only autorubric results need the dataset file" in result.stderr


@pytest.mark.sqlite_only  # one real process is enough; the in-process tests cover both databases
def test_real_process_imports_a_promptfoo_file(db_url, demo, workspace):
    exe = Path(sys.executable).with_name("judgekit")
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url}
    proc = subprocess.run([str(exe), "import-run", "--from", "promptfoo", str(PF / "results.binary.json"),
                           "--dataset", "demo", "--rubric", "demo", "--name", "pf"],
                          capture_output=True, text=True, env=env, cwd=workspace, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("imported run 'pf': 36 rows (judge promptfoo 0.121.20, model gpt-4o-mini; "
                                   "1 unscored; 36 calls)")
    proc = subprocess.run([str(exe), "import-run", "--from", "promptfoo", str(INS / "binary.json"),
                           "--dataset", "demo", "--rubric", "demo", "--name", "pf2"],
                          capture_output=True, text=True, env=env, cwd=workspace, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a promptfoo" in proc.stderr


# ----------------------------------------------------------------------------- the rules, unit by unit


BIN = Criterion("ok", "Is it ok?")
SCALE = Criterion("q", "How good?", kind="scale", levels={i: str(i) for i in range(1, 6)}, pass_at=3)
REF = tool_formats.SampleRef(tool_formats.Where("f.json"), explicit_id="a")
W = tool_formats.Where("f.json")


def raw(**kw) -> tool_formats.RawVerdict:
    return tool_formats.RawVerdict(REF, "ok", W, **kw)


@pytest.mark.parametrize(("crit", "fields", "on_scale", "value"), [
    (BIN, {"passed": True, "score": 0.2}, False, 1),   # the tool's own pass (its threshold) wins over a score
    (BIN, {"score": 1.0}, False, 1),
    (BIN, {"score": 0.0}, False, 0),
    (BIN, {"score": 0.7}, False, None),                 # not clearly a pass or a fail
    (BIN, {"label": "Pass"}, False, 1),
    (BIN, {"label": "P"}, False, None),                 # inspect's "partial"
    (BIN, {"passed": False, "unscored": "grader error"}, False, None),
    (SCALE, {"score": 4.0}, True, 4),
    (SCALE, {"score": 1.0}, False, None),               # a 0–1 score of 1.0 is "fully met", not level 1
    (SCALE, {"passed": True}, False, None),
    (SCALE, {"label": "4 - correct with minor omissions"}, False, 4),
    (SCALE, {"label": "45 apples"}, False, None),
    (SCALE, {"label": "Cannot assess"}, False, None),
])
def test_value_rules(crit, fields, on_scale, value):
    got, why = tool_formats.criterion_value(crit, raw(**fields), on_scale)
    assert got == value
    assert (why is None) == (value is not None)


@settings(deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.booleans())
def test_a_number_is_a_verdict_only_when_it_clearly_is_one(x, on_scale):
    binary, _ = tool_formats.criterion_value(BIN, raw(score=x), on_scale)
    assert binary == (int(x) if x in (0, 1) else None)
    level, _ = tool_formats.criterion_value(SCALE, raw(score=x), on_scale)
    assert level is None or (on_scale and level == x and level in range(1, 6))


def test_scores_read_as_levels_only_when_all_of_them_are_levels():
    assert tool_formats.reads_as_levels([4, 1, 5])
    assert not tool_formats.reads_as_levels([1, 0])  # a pass-rate
    assert not tool_formats.reads_as_levels([1, 1])  # nothing shows a 1–5 scale
    assert not tool_formats.reads_as_levels([3, 2.5])
    assert not tool_formats.reads_as_levels([])


EXAMPLES = {"e1": ("How?", "Do A."), "e2": ("Why?", "Do B."), "e3": ("Why?", "Same."), "e4": ("What?", "Same.")}
RUBRIC = Rubric("r", (BIN,))


def resolve(*refs: tool_formats.SampleRef):
    tf = tool_formats.ToolFile("promptfoo", verdicts=[tool_formats.RawVerdict(r, "ok", r.where, passed=True)
                                                     for r in refs])
    return tool_formats.resolve(tf, "f.json", examples=EXAMPLES, rubric=RUBRIC).verdicts


def ref(**kw) -> tool_formats.SampleRef:
    return tool_formats.SampleRef(tool_formats.Where("f.json", field=f"r{len(kw)}{sorted(kw)}"), **kw)


def test_matching_rules():
    assert resolve(ref(explicit_id="e2"))[0]["example_id"] == "e2"
    nfd = {"caf\u00e9-1": ("Q?", "A.")}  # the dataset stores ids NFC; a tool may write the decomposed form
    tf = tool_formats.ToolFile("promptfoo", verdicts=[tool_formats.RawVerdict(ref(explicit_id="cafe\u0301-1"), "ok",
                                                                              ref().where, passed=True)])
    assert tool_formats.resolve(tf, "f.json", examples=nfd, rubric=RUBRIC).verdicts[0]["example_id"] == "caf\u00e9-1"
    assert resolve(ref(candidate_ids=("e1",), answer=" Do A.\n"))[0]["example_id"] == "e1"
    # a tool id that happens to be an example id but judged another answer: the answer text decides
    assert resolve(ref(candidate_ids=("e1",), answer="Do B."))[0]["example_id"] == "e2"
    assert resolve(ref(answer="Same.", question="What?"))[0]["example_id"] == "e4"  # the question breaks the tie
    langfuse_trace = hashlib.sha256(b"e3").digest()[:16].hex()
    assert resolve(ref(candidate_ids=(langfuse_trace,)))[0]["example_id"] == "e3"
    with pytest.raises(InputError, match="equals the stored answer of 2 examples"):
        resolve(ref(answer="Same."))
    with pytest.raises(InputError, match="differs from the stored answer of example 'e1'"):
        resolve(ref(explicit_id="e1", answer="Do B."))
    with pytest.raises(InputError, match=r"sample 'x' \(and 1 more\) matches no example"):
        resolve(ref(candidate_ids=("x",)), ref(candidate_ids=("y",), answer="nope"))


def test_imported_cost_prefers_the_tools_money_then_the_list_price():
    prices = {"gpt-4o-mini": reports.Price(0.15, 0.075, 0.60)}
    assert reports.imported_cost({"usd": 0.5}, "gpt-4o-mini", 10, 0, 10, prices)[0] == 0.5
    assert reports.imported_cost({}, "openai/gpt-4o-mini", 1_000_000, 0, 0, prices)[0] == pytest.approx(0.15)
    usd, note = reports.imported_cost({}, "tool-judge", 10, 0, 10, prices)
    assert usd is None and "no price" in note


# ----------------------------------------------------------------------------- any damage: one clear error

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(node, prefix=()):
    yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from _paths(v, (*prefix, k))


def _small(tool: str):
    """A real file of each tool cut down to a few records (so the damage lands on what is read)."""
    if tool == "promptfoo":
        doc = json.loads((PF / "results.binary.json").read_text())
        doc["results"]["results"] = doc["results"]["results"][5:8]
        for r in doc["results"]["results"]:
            for c in r["gradingResult"]["componentResults"]:
                c.pop("metadata", None) if not c.get("metadata", {}).get("graderError") else None
        doc.pop("config")
        return doc
    if tool == "inspect":
        doc = json.loads((INS / "scale.json").read_text())
        doc["samples"] = [{k: v for k, v in s.items() if k not in ("events", "attachments", "messages")}
                          for s in doc["samples"][5:8]]
        return doc
    if tool == "autorubric":
        return [json.loads(x) for x in (AR / "demo-scale" / "items.jsonl").read_text().splitlines()[5:8]]
    return json.loads((LF / "scores.api.json").read_text())["data"][15:24]


SMALL = {tool: _small(tool) for tool in ("promptfoo", "inspect", "autorubric", "langfuse")}


@pytest.mark.sqlite_only
@pytest.mark.parametrize("tool", list(SMALL))
@settings(deadline=None)  # no wall-clock bound in a test (a loaded machine reads a JSON file slowly)
@given(data=st.data())
def test_any_damaged_file_is_read_or_refused_with_one_input_error(tool, data, tmp_path_factory):
    import copy

    doc = copy.deepcopy(SMALL[tool])
    paths = list(_paths(doc))[1:]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON_VALUES)
    folder = tmp_path_factory.mktemp(tool)
    extra = {}
    if tool == "autorubric":
        file = folder / "items.jsonl"
        file.write_text("\n".join(json.dumps(r) for r in doc) + "\n")
        extra = {"tool_dataset": AR / "dataset.scale.json"}
    else:
        file = folder / "file.json"
        file.write_text(json.dumps(doc if tool != "langfuse" else {"data": doc}))
    rubric = Rubric("demo-scale", tuple(
        Criterion(c["key"], c["question"], kind=c["kind"], levels={int(k): v for k, v in (c.get("levels") or {}).items()},
                  pass_at=c.get("pass_at")) for r in SLICE["rubrics"] for c in r["criteria"]))
    examples = {e["id"]: (e["question"], e["answer"]) for e in SLICE["examples"]}
    try:
        run = tool_formats.resolve(tool_formats.read_tool_file(tool, file, **extra), file, examples=examples,
                                   rubric=rubric)
    except InputError as e:
        assert str(e).startswith(str(file)) and "\n" not in str(e)
    else:
        for v in run.verdicts:
            crit = rubric.criterion(v["criterion"])
            assert v["value"] is None or v["value"] in crit.valid_values()


def test_numbers_no_score_can_be_and_metadata_too_deep_to_mean_anything_are_read_not_crashed_on(cli, engine, demo,
                                                                                              tmp_path):
    """A score of 10^400 (beyond a float), one of 5,000 digits (beyond Python's int-from-text limit) and a CSV
    metadata cell of 100,000 '[': the file imports, those verdicts unscored, no traceback."""
    doc = json.loads((LF / "scores.api.json").read_text())
    doc["data"][1].update(value=7_000_001, dataType="NUMERIC")  # placeholders, replaced as raw text below
    doc["data"][2].update(value=7_000_002, dataType="NUMERIC")
    text = json.dumps(doc).replace("7000001", "1" + "0" * 400).replace("7000002", "9" * 5000)
    (tmp_path / "big.json").write_text(text)
    result = cli("import-run", "--from", "langfuse", tmp_path / "big.json", "--dataset", "demo", "--rubric", "demo",
                 "--name", "big")
    assert result.exit_code == 0, result.stderr
    with Session(engine) as s:
        run = store.get_run(s, "big")
        errors = s.scalars(select(store.Verdict.error).where(store.Verdict.run_id == run.id,
                                                             store.Verdict.value.is_(None))).all()
    assert sum("the score is not a number" in e for e in errors) == 2, errors  # (the fixture has one other)
    lines = (LF / "scores.blob.csv").read_text().splitlines()
    lines[0] += ",metadata"
    lines[1:] = [line + (',"' + "[" * 100_000 + '"' if i == 0 else ",") for i, line in enumerate(lines[1:])]
    (tmp_path / "deep.csv").write_text("\n".join(lines) + "\n")
    result = cli("import-run", "--from", "langfuse", tmp_path / "deep.csv", "--dataset", "demo", "--rubric", "demo",
                 "--name", "deep")
    assert result.exit_code == 0, result.stderr


def test_negative_or_impossible_costs_and_token_counts_in_a_tool_file_are_unknown(cli, engine, demo, tmp_path):
    """A cost below 0 or a token count no call can have is unknown, never a negative total."""
    def poison(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            item = json.loads(line)
            item["report"]["completion_cost"] = -1.0
            item["report"]["token_usage"].update(prompt_tokens=-50_000, completion_tokens=3_000_000_000)
            out.append(json.dumps(item))
        return out

    run_dir = autorubric_dir(tmp_path, "run", poison)
    assert cli("import-run", "--from", "autorubric", run_dir, *AR_ARGS, "--dataset", "demo", "--rubric", "demo",
               "--name", "neg").exit_code == 0
    with Session(engine) as s:
        calls = s.scalars(select(store.Call).where(store.Call.run_id == store.get_run(s, "neg").id)).all()
        cost = reports.run_cost(s, store.get_run(s, "neg"))
    assert calls and all(c.prompt_tokens in (0, None) and c.completion_tokens in (0, None) for c in calls)
    assert cost.usd is None or cost.usd >= 0
