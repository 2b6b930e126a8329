"""`judgekit check`: gates computed from the same reports as `judgekit report`, exit codes, the readable
summary, JUnit XML (one test case per criterion and gate), thresholds from YAML, and refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import load_demo, simulated_runs

SINGLE, SPLIT = "harness-single-call", "harness-split-call"


@pytest.fixture
def runs(engine, db_url):
    load_demo(engine, 60)
    return simulated_runs(engine, db_url)


def report(cli, *args) -> dict:
    result = cli("report", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def check(cli, *args):
    return cli("check", *args)


def test_kappa_gate_uses_the_agreement_report_and_fails_below_the_threshold(cli, runs, tmp_path):
    kappas = {k: e["kappa"] for k, e in report(cli, "agreement", "--run", SPLIT)["criteria"].items()}
    low = sorted(kappas.values())[1]  # at least one criterion falls below, the rest hold
    threshold = round(low + 0.001, 3)
    junit = tmp_path / "ci" / "judgekit.xml"
    result = check(cli, "--run", SPLIT, "--min-kappa", str(threshold), "--junit", junit)
    assert result.exit_code == 1
    failing = sorted(k for k, v in kappas.items() if v < threshold)
    assert len(failing) == 2
    lines = result.stdout.splitlines()
    assert lines[0] == f"judgekit check: run:{SPLIT} vs human:reference"
    for k, v in kappas.items():
        line = next(ln for ln in lines if f" {k} " in ln)
        assert line.startswith("  FAIL" if k in failing else "  ok  ")
        assert f"κ {v:.2f} [" in line
    assert lines[-1] == f"{len(kappas) - 2} of {len(kappas)} gates hold; 2 failed"
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == str(len(kappas)) and suite.get("failures") == "2"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(kappas)
    assert {n for n, c in cases.items() if c.find("failure") is not None} == set(failing)
    assert all(c.get("classname") == "judgekit.check.min_kappa" for c in cases.values())


def test_all_gates_hold_exit_zero_and_flip_rate_is_against_the_baseline(cli, runs, tmp_path):
    cmp = report(cli, "compare", SINGLE, SPLIT)
    rates = {k: (c["fail_to_pass"] + c["pass_to_fail"]) / c["n"] for k, c in cmp["criteria"].items()}
    junit = tmp_path / "j.xml"
    result = check(cli, "--run", SPLIT, "--baseline", SINGLE, "--max-flip-rate", "1", "--min-kappa", "-1",
                   "--max-induced", "99", "--junit", junit, "--format", "json")
    assert result.exit_code == 0, result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert out["ok"] is True and out["failed"] == 0
    flips = {r["criterion"]: r["value"] for r in out["results"] if r["gate"] == "max_flip_rate"}
    assert flips == pytest.approx(rates)
    gates = [r["gate"] for r in out["results"]]
    assert gates.count("min_kappa") == gates.count("max_flip_rate") == len(rates) and gates.count("max_induced") == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert len(suite.findall("testcase")) == 2 * len(rates) + 1 and suite.get("failures") == "0"
    worst = max(rates.values())
    result = check(cli, "--run", SPLIT, "--baseline", SINGLE, "--max-flip-rate", str(worst - 1e-9))
    assert result.exit_code == 1
    assert "differ from run:" + SINGLE in result.stdout


def test_induced_gate_counts_pairs_the_audit_blames_on_the_run(cli, engine, db_url):
    load_demo(engine, 120)
    simulated_runs(engine, db_url)
    phi = report(cli, "phi", "--run", SINGLE, "--run", SPLIT, "--human", "--n-boot", "1000")
    blamed = sorted(f"{a['a']} × {a['b']}" for a in phi["audit"] if f"run:{SINGLE}" in a["induced_by"])
    result = check(cli, "--run", SINGLE, "--max-induced", "0", "--audit-run", SPLIT, "--format", "json")
    out = json.loads(result.stdout)
    (induced,) = out["results"]
    assert induced["value"] == len(blamed)
    assert all(p in induced["message"] for p in blamed)
    assert result.exit_code == (1 if blamed else 0)
    assert blamed, "the simulated judge's conditioning (G = 1.5) induces associations under `single`"
    result = check(cli, "--run", SINGLE, "--max-induced", str(len(blamed)), "--audit-run", SPLIT)
    assert result.exit_code == 0


def test_induced_gate_fails_when_no_pair_can_be_judged_for_the_run(cli, runs, engine, tmp_path):
    """A run that passes everything leaves its every phi undefined: no pair can be blamed on it or cleared,
    so the gate cannot hold — it fails and says so, instead of reporting 0 induced pairs."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from judgekit import store

    with Session(engine) as s:
        ids = [e for (e,) in s.execute(select(store.Example.ext_id))]
        keys = store.load_rubric(s, "demo").keys
    path = tmp_path / "allpass.jsonl"
    path.write_text("".join(json.dumps({"example_id": e, "criterion": k, "verdict": True}) + "\n"
                            for e in ids for k in keys))
    assert cli("import-run", path, "--dataset", "demo", "--rubric", "demo", "--name", "allpass").exit_code == 0
    result = check(cli, "--run", "allpass", "--max-induced", "0", "--audit-run", SPLIT, "--format", "json")
    (induced,) = json.loads(result.stdout)["results"]
    assert result.exit_code == 1 and induced["ok"] is False and induced["value"] is None
    assert induced["message"].startswith(
        f"the phi of run:allpass is undefined for every criterion pair ({len(keys) * (len(keys) - 1) // 2}; ")


def test_thresholds_from_yaml_with_per_criterion_overrides(cli, runs, tmp_path):
    kappas = {k: e["kappa"] for k, e in report(cli, "agreement", "--run", SPLIT)["criteria"].items()}
    key = min(kappas, key=kappas.get)
    gates = tmp_path / "gates.yaml"
    gates.write_text(f"min_kappa: -1\ncriteria:\n  {key}: {{min_kappa: 0.999}}\n", encoding="utf-8")
    result = check(cli, "--run", SPLIT, "--gates", gates, "--format", "json")
    assert result.exit_code == 1
    failed = [r for r in json.loads(result.stdout)["results"] if not r["ok"]]
    assert [(r["criterion"], r["threshold"]) for r in failed] == [(key, 0.999)]
    # the command line wins over the file
    assert check(cli, "--run", SPLIT, "--gates", gates, "--min-kappa", "-1").exit_code == 1  # per-criterion stays
    gates.write_text(f"min_kappa: 0.9\ncriteria:\n  {key}: {{min_kappa: null}}\n", encoding="utf-8")
    out = json.loads(check(cli, "--run", SPLIT, "--gates", gates, "--min-kappa", "-1", "--format", "json").stdout)
    assert out["ok"] and key not in {r["criterion"] for r in out["results"]}


BAD_GATES = [
    ("min_kappa: high\n", "gates.yaml:1: field 'min_kappa': must be a number within -1..1, not 'high'"),
    ("min_kappa: 0.5\nmax_flip: 0.1\n", "gates.yaml:1: field 'max_flip': unknown key"),
    ("criteria:\n  concise: {max_induced: 1}\n", "gates.yaml:2: field 'max_induced': criterion 'concise': unknown gate"),
    ("min_kappa: 0.5\nmin_kappa: 0.6\n", "gates.yaml:2: field 'min_kappa': duplicate key in a mapping"),
    ("max_induced: -1\n", "gates.yaml:1: field 'max_induced': must be a whole number within 0..1e+09, not -1"),
    ("min_kappa: [\n", "gates.yaml:2: invalid YAML"),
]

REFUSALS = [
    (["--max-flip-rate", "0.1"], "--max-flip-rate needs --baseline RUN"),
    (["--max-induced", "0"], "--max-induced needs another run for the audit to compare with"),
    ([], "no gate to check"),
    (["--min-kappa", "2"], "--min-kappa must be within -1..1, not 2.0"),
    (["--min-kappa", "0.5", "--human", "--annotator", "reference"], "--human and --annotator together"),
    (["--min-kappa", "0.5", "--annotator", "nobody"], "annotator 'nobody' has no labels"),
]


def test_bad_gates_files_and_arguments_are_one_clear_error_and_write_nothing(cli, runs, tmp_path):
    gates = tmp_path / "gates.yaml"
    junit = tmp_path / "j.xml"
    for text, message in BAD_GATES:
        gates.write_text(text, encoding="utf-8")
        result = check(cli, "--run", SPLIT, "--gates", gates, "--junit", junit)
        assert result.exit_code == 2, text
        assert result.stderr.strip().startswith(f"error: {tmp_path}/{message}"), result.stderr
        assert "\n" not in result.stderr.strip()
        assert not junit.exists()
    for args, message in REFUSALS:
        result = check(cli, "--run", SPLIT, *args, "--junit", junit)
        assert result.exit_code == 2, args
        assert message in result.stderr, result.stderr
        assert not junit.exists()


def test_undefined_kappa_fails_the_gate_and_says_why(cli, engine, tmp_path):
    """On the examples both scored, run and humans pass every `concise` answer: κ is undefined there
    (chance agreement is total), and the gate fails rather than pass unevaluated."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from judgekit import store

    load_demo(engine, 40)
    with Session(engine) as s:
        rows = s.execute(select(store.Example.ext_id, store.Label.criterion, store.Label.value)
                         .join(store.Label, store.Label.example_id == store.Example.id)).all()
    keys = store.load_rubric(Session(engine), "demo").keys
    lines = [json.dumps({"example_id": e, "criterion": c, "verdict": bool(v)})
             for e, c, v in rows if c in keys and (c != "concise" or v == 1)]
    path = tmp_path / "constant.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli("import-run", path, "--dataset", "demo", "--rubric", "demo", "--name", "constant").exit_code == 0
    result = check(cli, "--run", "constant", "--min-kappa", "-1", "--format", "json")
    results = {r["criterion"]: r for r in json.loads(result.stdout)["results"]}
    assert result.exit_code == 1
    assert results["concise"]["ok"] is False and results["concise"]["value"] is None
    n = results["concise"]["n"]
    assert results["concise"]["message"] == (  # the same words as `report agreement`: which side is constant
        f"every verdict of concise under run:constant is pass ({n} of {n}): κ undefined (a constant column "
        "agrees only by chance); the gate cannot hold")
    assert all(r["ok"] for k, r in results.items() if k != "concise")


def test_real_process_exit_status(runs, db_url, tmp_path):
    """The console script as CI runs it: exit status 1 on a failing gate, 0 when every gate holds."""
    exe = os.path.join(os.path.dirname(sys.executable), "judgekit")
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url}
    bad = subprocess.run([exe, "check", "--run", SPLIT, "--min-kappa", "0.999"], capture_output=True, text=True,
                         env=env, timeout=300)
    good = subprocess.run([exe, "check", "--run", SPLIT, "--min-kappa", "-1"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert (bad.returncode, good.returncode) == (1, 0), bad.stderr + good.stderr
    assert "FAIL min κ" in bad.stdout


def test_junit_xml_is_well_formed_whatever_the_names_hold():
    from judgekit import gates

    odd = 'run <b>&amp; "q" ]]>\x01\x1b\nline2 \ud800'
    rep = gates.CheckReport(odd, "ann\x02", None, gates.Gates(min_kappa=0.5), [
        gates.GateResult("min_kappa", "crit\x0b<&>", False, 0.1, 0.5, f"κ 0.10 < 0.50 on {odd}", n=8),
        gates.GateResult("min_kappa", "ok", True, 0.9, 0.5, "fine", n=8)])
    root = ET.fromstring(gates.junit_xml(rep).encode("utf-8"))  # parses: nothing XML 1.0 cannot hold
    suite = root.find("testsuite")
    assert suite.get("name").startswith('judgekit check run <b>&amp; "q" ]]>\ufffd\ufffd')
    failure = suite.find("testcase/failure")
    assert failure.get("type") == "min_kappa" and "]]>" in failure.text


def test_yaml_thresholds_in_exponent_notation_are_numbers(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e-1 as text; a threshold written that way is still the number."""
    from judgekit import gates

    path = tmp_path / "gates.yaml"
    path.write_text("min_kappa: 6e-1\nmax_flip_rate: 1E-1\ncriteria:\n  safety: {min_kappa: 8.5e-1}\n")
    g = gates.load_gates(path)
    assert (g.min_kappa, g.max_flip_rate, g.criteria["safety"]["min_kappa"]) == (0.6, 0.1, 0.85)
