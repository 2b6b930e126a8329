"""Reports end to end: files imported through the CLI into a real SQLite store, `judgekit report …` and
`judgekit export-report` read back, numbers checked by hand arithmetic and against scipy / scikit-learn."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from judgekit import figures, reports, store

BACKENDS = ("sqlite", "postgresql")  # the report and labeling paths run on both stores

N = 600
IDS = [f"e-{i:03d}" for i in range(N)]
BINARY = ["answers_question", "cites_source", "grounded", "no_fabrication", "polite"]

RUBRIC = """name: support
criteria:
""" + "".join(f"  - key: {k}\n    question: Is it {k}?\n" for k in BINARY)

SCALE_RUBRIC = """name: support-scale
criteria:
  - key: safety
    question: How safe is the answer?
    kind: scale
    levels: {1: harmful, 2: risky, 3: acceptable, 4: careful, 5: exemplary}
    pass_at: 3
  - key: clarity
    question: How clear is the answer?
    kind: scale
    levels: {1: opaque, 2: muddled, 3: fine, 4: clear, 5: crisp}
    pass_at: 4
ko_rule: {criterion: safety, floor: 1}
"""

XSS = "<script>alert('owned')</script>"


# ----------------------------------------------------------------------------------------- helpers


@pytest.fixture
def ws(cli, tmp_path) -> Path:
    """Dataset `support` (600 answers, each carrying a <script> tag); rubrics support and support-scale."""
    ds = tmp_path / "dataset.jsonl"
    ds.write_text(
        "".join(
            json.dumps(
                {"id": e, "question": f"Q{i}?", "context": "ctx", "answer": f"Answer {i} {XSS} & more"}
            )
            + "\n"
            for i, e in enumerate(IDS)
        )
    )
    (tmp_path / "rubric.yaml").write_text(RUBRIC)
    (tmp_path / "scale.yaml").write_text(SCALE_RUBRIC)
    assert cli("import-dataset", ds, "--name", "support").exit_code == 0
    assert cli("import-rubric", tmp_path / "rubric.yaml").exit_code == 0
    assert cli("import-rubric", tmp_path / "scale.yaml").exit_code == 0
    return tmp_path


def _value(v, scale: bool):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return int(v) if scale else bool(v)


def import_run(
    cli,
    ws: Path,
    name: str,
    columns: dict[str, np.ndarray],
    *,
    rubric: str = "support",
    ids: list[str] | None = None,
    p_pass: dict[str, np.ndarray] | None = None,
) -> None:
    """Write a run.jsonl (NaN → null = unscored) and import it as run `name`."""
    ids = ids or IDS
    scale = rubric == "support-scale"
    lines = []
    for r, ex in enumerate(ids):
        for key, col in columns.items():
            item = {"example_id": ex, "criterion": key, "verdict": _value(float(col[r]), scale)}
            if p_pass and key in p_pass:
                item["p_pass"] = float(p_pass[key][r])
            lines.append(json.dumps(item))
    path = ws / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = cli("import-run", path, "--dataset", "support", "--rubric", rubric, "--name", name)
    assert result.exit_code == 0, result.stderr


def import_labels(
    cli, ws: Path, annotator: str, columns: dict[str, np.ndarray], ids: list[str], scale: bool = False
) -> None:
    path = ws / f"labels-{annotator}-{'s' if scale else 'b'}.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "example_id": ex,
                    "criterion": k,
                    "value": _value(float(col[r]), scale),
                    "annotator": annotator,
                }
            )
            + "\n"
            for r, ex in enumerate(ids)
            for k, col in columns.items()
            if not math.isnan(float(col[r]))
        )
    )
    result = cli("import-labels", path, "--dataset", "support")
    assert result.exit_code == 0, result.stderr


def report_json(cli, *args) -> dict:
    result = cli("report", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1  # exactly one JSON value on one line
    return json.loads(result.stdout)


def blocks(*parts: tuple[int, int]) -> np.ndarray:
    """Concatenate (value, count) runs: blocks((1, 3), (0, 2)) = [1, 1, 1, 0, 0]."""
    return np.concatenate([np.full(n, float(v)) for v, n in parts])


# ----------------------------------------------------------------------------------------- seed 003: crosstab


def test_crosstab_reproduces_seed_003_table(cli, ws):
    # rows = C3 cites_source, cols = C1 answers_question:
    # 358 pass/pass, 8 pass/fail, 161 fail/pass, 73 fail/fail
    cites = blocks((1, 358), (1, 8), (0, 161), (0, 73))
    answers = blocks((1, 358), (0, 8), (1, 161), (0, 73))
    import_run(cli, ws, "seed", {"answers_question": answers, "cites_source": cites})

    got = report_json(cli, "crosstab", "--run", "seed", "--row", "cites_source", "--col", "answers_question")
    assert got["row"] == "cites_source" and got["col"] == "answers_question" and got["n"] == 600
    assert got["counts"] == {"pass": {"pass": 358, "fail": 8}, "fail": {"pass": 161, "fail": 73}}
    # col_fail_rate: 8 / 366 = 0.021858 → 0.0219; 73 / 234 = 0.311966 → 0.3120
    assert got["col_fail_rate"] == {"pass": 0.0219, "fail": 0.312}
    # ratio = 0.311966 / 0.021858 = 14.272 → 14.27
    assert got["ratio"] == pytest.approx(14.27)
    # phi = (358·73 − 8·161) / sqrt(366·234·519·81) = 24846 / sqrt(3,600,388,116) = 24846 / 60003.2 = 0.4141
    assert got["phi"] == pytest.approx(0.414)
    assert got["source"] == "run:seed" and "(imported)" in got["judge"]
    assert got["cells"]["pass"]["fail"] == IDS[358:366]
    assert len(got["cells"]["fail"]["pass"]) == 161 and got["cells"]["fail"]["pass"][0] == "e-366"

    table = cli("report", "crosstab", "--run", "seed", "--row", "cites_source", "--col", "answers_question")
    assert table.exit_code == 0
    for text in ("358", "161", "(366)", "(234)", "2.2%", "31.2%", "ratio 14.27", "phi 0.414"):
        assert text in table.stdout


# ----------------------------------------------------------------------------------------- seed 003: compare


def test_compare_reproduces_seed_003_accounting(cli, ws):
    # answers_question: 128 fail→pass, 4 fail under both, 7 pass→fail, 461 pass under both
    # → a_fail = 128 + 4 = 132, b_fail = 4 + 7 = 11.
    a = blocks((0, 128), (0, 4), (1, 7), (1, 461))
    b = blocks((1, 128), (0, 4), (0, 7), (1, 461))
    cites_a = blocks((1, 300), (0, 300))
    cites_b = blocks((1, 300), (0, 290), (1, 10))
    import_run(cli, ws, "single", {"answers_question": a, "cites_source": cites_a})
    import_run(cli, ws, "split", {"answers_question": b, "cites_source": cites_b})

    got = report_json(cli, "compare", "single", "split")
    c1 = got["criteria"]["answers_question"]
    assert (c1["a_fail"], c1["b_fail"], c1["fail_to_pass"], c1["pass_to_fail"]) == (132, 11, 128, 7)
    assert c1["n"] == 600 and got["n"] == 600
    assert c1["mcnemar_p"] == pytest.approx(sps.binomtest(128, 135, 0.5).pvalue, rel=1e-9)
    assert c1["fail_to_pass_ids"] == IDS[:128] and c1["pass_to_fail_ids"] == IDS[132:139]
    assert got["attribution"] == {
        "a": {"answers_question": 132, "cites_source": 300},
        "b": {"answers_question": 11, "cites_source": 290},
    }
    # all-pass: a passes both on rows 132..299 (168);
    # b on rows 0..127, 139..299 and 590..599 (128 + 161 + 10 = 299)
    assert got["all_pass_rate"] == {"a": pytest.approx(168 / 600), "b": pytest.approx(299 / 600)}
    # imported runs made no calls: zeros, no latency, and no money
    cost = got["cost"]["a"]
    assert (cost["calls"], cost["prompt_tokens"], cost["completion_tokens"], cost["cached_tokens"]) == (
        0,
        0,
        0,
        0,
    )
    assert cost["latency_p50"] is None and cost["usd"] == 0.0

    table = cli("report", "compare", "single", "split")
    assert table.exit_code == 0 and "answers_question" in table.stdout and "128" in table.stdout


def test_cost_from_calls_and_price_table(ws, session, tmp_path, cli):
    import_run(cli, ws, "seed", {"answers_question": np.ones(N)})
    run = store.get_run(session, "seed")
    judge = store.get_or_create_judge(
        session, kind="openai", name="oa", base_url="https://x", model="gpt-4o-mini"
    )
    run.judge_id = judge.id
    run.wall_s = 12.5
    ex = store.example_ids(session, run.dataset_id)
    session.execute(
        store.insert(store.Call),
        [
            {
                "run_id": run.id,
                "example_id": ex[IDS[i]],
                "criteria": ["answers_question"],
                "attempts": 1 + (i == 2),
                "latency_s": float(i + 1),
                "prompt_tokens": 1000,
                "completion_tokens": 100,
                "cached_tokens": 400,
                "status": "ok" if i != 3 else "error",
                "request": {},
            }
            for i in range(4)
        ],
    )
    session.flush()
    cost = reports.run_cost(session, run)
    assert (cost.calls, cost.prompt_tokens, cost.completion_tokens, cost.cached_tokens) == (
        4,
        4000,
        400,
        1600,
    )
    assert (cost.retries, cost.failed_calls, cost.wall_s) == (1, 1, 12.5)
    # latency of the calls that got a reply (1, 2, 3 s; the failed one's 4 s is not a reply time), the same
    # figures as the run's stored totals — one count (store.run_totals) behind both
    assert cost.latency_p50 == pytest.approx(2.0) and cost.latency_p95 == pytest.approx(
        np.percentile([1, 2, 3], 95), abs=1e-4
    )
    assert store.run_totals(session, run.id)["latency_p95"] == cost.latency_p95
    # gpt-4o-mini: 2400 uncached × 0.15 + 1600 cached × 0.075 + 400 out × 0.60, per 1M tokens
    assert cost.usd == pytest.approx((2400 * 0.15 + 1600 * 0.075 + 400 * 0.60) / 1e6)
    assert reports.price_calls("gpt-4o-mini-2024-07-18", 1000, 0, 0) == pytest.approx(0.15 / 1000)
    assert reports.price_calls("my-own-model", 1000, 0, 0) is None
    (tmp_path / "prices.yaml").write_text("my-own-model: {input: 1.0, output: 2.0}\n")
    assert reports.price_calls("my-own-model", 1000, 500, 1000) == pytest.approx(
        (1000 * 1.0 + 1000 * 2.0) / 1e6
    )
    judge2 = store.get_or_create_judge(
        session, kind="openai", name="oa", base_url="https://x", model="mystery"
    )
    run.judge_id = judge2.id
    unknown = reports.run_cost(session, run, prices=reports.DEFAULT_PRICES)
    assert unknown.usd is None and "mystery" in unknown.note
    session.rollback()


# ----------------------------------------------------------------------------------------- phi and the audit


def _audit_workspace(cli, ws):
    """Runs `single` and `split` over 600 answers; `ana` labels e-000..e-059; `reference` labels all.

    Per block of 60 (j = i mod 60): grounded = j even; no_fabrication = grounded flipped where j < 10
    (25/5/5/25 per block → phi = (625 − 25) / 900 = 0.667) under every instrument: a real association.
    answers_question × cites_source: humans and split independent (15/15/15/15 → phi 0); the single call
    couples them (240/60/60/240 → phi = (240² − 60²) / 300² = 0.6): an induced association.
    """
    i = np.arange(N)
    j = i % 60
    grounded = (j % 2 == 0).astype(float)
    nofab = np.where(j < 10, 1 - grounded, grounded)
    single = {
        "answers_question": blocks((1, 300), (0, 300)),
        "cites_source": blocks((1, 240), (0, 60), (1, 60), (0, 240)),
        "grounded": grounded,
        "no_fabrication": nofab,
        "polite": np.ones(N),
    }
    split = {
        "answers_question": (j < 30).astype(float),
        "cites_source": (j % 30 < 15).astype(float),
        "grounded": grounded,
        "no_fabrication": nofab,
        "polite": (j % 3 == 0).astype(float),
    }
    import_run(cli, ws, "single", single)
    import_run(cli, ws, "split", split)
    h = slice(0, 60)
    ana = {
        "answers_question": (j < 30).astype(float)[h],
        "cites_source": (j % 30 < 15).astype(float)[h],
        "grounded": grounded[h],
        "no_fabrication": nofab[h],
        "polite": (j % 3 == 0).astype(float)[h],
    }
    import_labels(cli, ws, "ana", ana, IDS[:60])
    rng = np.random.default_rng(1)
    import_labels(cli, ws, "reference", {k: rng.integers(0, 2, N).astype(float) for k in BINARY}, IDS)
    return single, split, ana


def _matrix(col) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in col["matrix"]])


def test_phi_report_matrices_notes_and_audit(cli, ws):
    single, split, ana = _audit_workspace(cli, ws)
    got = report_json(cli, "phi", "--run", "single", "--run", "split", "--human", "--n-boot", "400")
    assert got["criteria"] == BINARY
    cols = {c["source"]: c for c in got["columns"]}
    assert list(cols) == ["run:single", "run:split", "human"]  # `reference` is not in the consensus
    assert cols["human"]["n"] == 60 and cols["human"]["judge"] == "human: ana"
    assert cols["run:single"]["n"] == 600

    expected = np.corrcoef(np.column_stack([single[k] for k in BINARY[:4]]), rowvar=False)
    np.testing.assert_allclose(_matrix(cols["run:single"])[:4, :4], expected, atol=1e-12)
    np.testing.assert_allclose(
        _matrix(cols["run:split"]),
        np.corrcoef(np.column_stack([split[k] for k in BINARY]), rowvar=False),
        atol=1e-12,
    )
    np.testing.assert_allclose(
        _matrix(cols["human"]),
        np.corrcoef(np.column_stack([ana[k] for k in BINARY]), rowvar=False),
        atol=1e-12,
    )
    # polite passes everywhere under the single call: its row and column are null, and the note says why
    assert cols["run:single"]["matrix"][4] == [None] * 5
    assert all(row[4] is None for row in cols["run:single"]["matrix"])
    assert cols["run:single"]["ci_low"][4][0] is None
    assert (
        "every verdict of polite under run:single is pass (600 of 600): phi is undefined"
        in cols["run:single"]["notes"]
    )
    assert cols["run:single"]["n_matrix"][0][1] == 600
    lo, hi = cols["human"]["ci_low"][0][1], cols["human"]["ci_high"][0][1]
    assert lo < 0 < hi

    audit = {(a["a"], a["b"]): a for a in got["audit"]}
    induced = audit[("answers_question", "cites_source")]
    assert induced["verdict"] == "induced" and induced["induced_by"] == ["run:single"]
    assert induced["values"]["run:single"]["phi"] == pytest.approx(0.6)
    assert induced["values"]["human"]["phi"] == pytest.approx(0.0, abs=1e-12)
    real = audit[("grounded", "no_fabrication")]
    assert real["verdict"] == "real" and real["induced_by"] == []
    assert real["values"]["human"]["phi"] == pytest.approx(600 / 900)
    polite = audit[("answers_question", "polite")]
    assert polite["values"]["run:single"]["phi"] is None and polite["values"]["run:single"]["lo"] is None
    assert polite["values"]["run:single"]["reason"] == (
        "every verdict of polite under run:single is pass (600 of 600): phi undefined")
    # the evidence the verdicts rest on: the paired shift on all 600 answers, the humans' test
    assert got["reference"] == "run:split" and induced["reference"] == "run:split"
    shift = induced["evidence"]["shift"]["run:single"]
    assert shift["value"] == pytest.approx(0.6) and shift["n"] == 600 and shift["significant"]
    assert shift["lo"] < 0.6 < shift["hi"] and shift["hi"] - shift["lo"] < 0.25
    assert not induced["evidence"]["human"]["significant"] and real["evidence"]["human"]["significant"]
    assert real["evidence"]["human"]["q"] <= 0.05
    assert induced["distorted_by"] == [] and induced["label_more"] is None
    assert "Benjamini" in got["fdr"] and "Jeffreys" in got["interval"]

    table = cli("report", "phi", "--run", "single", "--run", "split", "--human", "--n-boot", "200")
    assert table.exit_code == 0 and "induced by run:single" in table.stdout and "phi is undefined" in table.stdout
    assert "reference harness run:split" in table.stdout and "Benjamini" in table.stdout
    # an explicit reference: the other run is compared with it
    other = report_json(cli, "phi", "--run", "single", "--run", "split", "--human", "--reference", "single",
                        "--n-boot", "200")
    assert other["reference"] == "run:single"
    assert "run:split" in other["audit"][0]["evidence"]["shift"]
    bad = cli("report", "phi", "--run", "single", "--run", "split", "--reference", "nope")
    assert bad.exit_code == 2 and "--reference nope: not one of the runs" in bad.stderr


def test_human_falls_back_to_reference_and_annotator_source(cli, ws):
    rng = np.random.default_rng(3)
    import_labels(cli, ws, "reference", {k: rng.integers(0, 2, N).astype(float) for k in BINARY[:2]}, IDS)
    got = report_json(cli, "phi", "--human", "--n-boot", "200")
    assert [c["source"] for c in got["columns"]] == ["human:reference"]
    assert got["criteria"] == BINARY[:2] and got["columns"][0]["n"] == 600
    ct = report_json(
        cli, "crosstab", "--annotator", "reference", "--row", "answers_question", "--col", "cites_source"
    )
    assert ct["source"] == "annotator:reference" and ct["n"] == 600


# ----------------------------------------------------------------------------------------- agreement


def test_agreement_matches_sklearn(cli, ws):
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, N).astype(float)
    judge = np.where(rng.random(N) < 0.8, truth, 1 - truth)
    judge[[3, 17, 41]] = np.nan  # unscored verdicts are left out pairwise
    p_pass = np.clip(0.5 * judge + 0.5 * rng.random(N), 0, 1)
    p_pass = np.where(np.isnan(p_pass), 0.5, p_pass)
    cites = rng.integers(0, 2, N).astype(float)
    import_run(cli, ws, "agree", {"answers_question": judge, "cites_source": cites},
               p_pass={"answers_question": p_pass})
    ana = truth[:60].copy()
    ben = np.where(rng.random(60) < 0.85, ana, 1 - ana)
    import_labels(cli, ws, "ana", {"answers_question": ana, "cites_source": np.ones(60)}, IDS[:60])
    import_labels(cli, ws, "ben", {"answers_question": ben}, IDS[:60])

    got = report_json(cli, "agreement", "--run", "agree", "--annotator", "ana")
    e = got["criteria"]["answers_question"]
    ok = ~np.isnan(judge[:60])
    h, j = ana[ok], judge[:60][ok]
    assert e["n"] == 57
    assert e["accuracy"] == pytest.approx(np.mean(h == j))
    assert e["kappa"] == pytest.approx(cohen_kappa_score(h, j))
    assert e["kappa_ci"][0] < e["kappa"] < e["kappa_ci"][1]
    assert e["tpr"] == pytest.approx(np.mean(j[h == 0] == 0))  # fail is the positive class
    assert e["tnr"] == pytest.approx(np.mean(j[h == 1] == 1))
    assert e["prevalence"] == pytest.approx(np.mean(h == 0))
    assert e["auc"] == pytest.approx(roc_auc_score(ana, p_pass[:60]))  # p_pass is present on all 60
    assert got["criteria"]["cites_source"]["auc"] is None  # no P(pass) recorded for it
    # ana passes every cites_source: kappa would be 0 by arithmetic but measures only chance agreement, so
    # it is undefined, with the reason (formerly "0.00 [-0.00, 0.00]")
    cs = got["criteria"]["cites_source"]
    assert cs["kappa"] is None and cs["kappa_ci"] == [None, None]
    assert cs["kappa_reason"] == ("every label of cites_source under annotator:ana is pass (60 of 60): κ undefined "
                                  "(a constant column agrees only by chance)")
    assert e["kappa_reason"] is None
    # accuracy carries its Jeffreys interval
    assert e["accuracy_ci"][0] < e["accuracy"] < e["accuracy_ci"][1]
    # pooled over criteria: macro kappa over the one criterion with a defined kappa; micro and accuracy over both
    pooled = got["pooled"]
    assert pooled["criteria"] == 1 and pooled["n"] == 60
    assert pooled["macro_kappa"]["value"] == pytest.approx(e["kappa"])
    all_h, all_j = np.concatenate([h, np.ones(60)]), np.concatenate([j, cites[:60]])
    assert pooled["micro_kappa"]["value"] == pytest.approx(cohen_kappa_score(all_h, all_j))
    assert pooled["accuracy"]["value"] == pytest.approx(np.mean(all_h == all_j))
    for what in ("macro_kappa", "micro_kappa", "accuracy"):
        assert pooled[what]["lo"] < pooled[what]["value"] < pooled[what]["hi"]
    table = cli("report", "agreement", "--run", "agree", "--annotator", "ana")
    assert "pooled over 1 criteria with a defined κ and 60 examples: macro κ" in table.stdout
    assert "κ undefined (a constant column agrees only by chance)" in table.stdout

    # default human column = consensus of ana and ben: disagreements are ties → left out
    cons = report_json(cli, "agreement", "--run", "agree")
    both = ok & (ana == ben)
    assert cons["human"] == "human" and cons["criteria"]["answers_question"]["n"] == int(both.sum())
    assert cons["criteria"]["answers_question"]["kappa"] == pytest.approx(
        cohen_kappa_score(ana[both], judge[:60][both])
    )
    pairs = cons["annotators"]["criteria"]["answers_question"]["pairs"]
    assert pairs[0]["kappa"] == pytest.approx(cohen_kappa_score(ana, ben))
    assert -1 <= cons["annotators"]["criteria"]["answers_question"]["alpha"] <= 1

    # judge vs judge: a run against itself agrees perfectly
    import_run(cli, ws, "agree2", {"answers_question": judge})
    jj = report_json(cli, "agreement", "--run", "agree2", "--vs-run", "agree")
    assert jj["criteria"]["answers_question"]["kappa"] == pytest.approx(1.0)
    assert jj["criteria"]["answers_question"]["n"] == 597
    assert cli("report", "agreement", "--run", "agree").exit_code == 0


def test_agreement_scale_metrics(cli, ws):
    rng = np.random.default_rng(11)
    human = rng.integers(1, 6, (60, 2)).astype(float)
    judge = np.clip(np.vstack([human, rng.integers(1, 6, (N - 60, 2))]) + rng.integers(-1, 2, (N, 2)), 1, 5)
    import_run(cli, ws, "scaled", {"safety": judge[:, 0], "clarity": judge[:, 1]}, rubric="support-scale")
    import_labels(cli, ws, "ana", {"safety": human[:, 0], "clarity": human[:, 1]}, IDS[:60], scale=True)
    got = report_json(cli, "agreement", "--run", "scaled", "--annotator", "ana")
    for col, key, pass_at in ((0, "safety", 3), (1, "clarity", 4)):
        e = got["criteria"][key]
        h, j = human[:, col], judge[:60, col]
        assert e["n"] == 60
        assert e["mean_abs_delta"] == pytest.approx(np.abs(h - j).mean())
        assert e["weighted_kappa"] == pytest.approx(
            cohen_kappa_score(h, j, weights="quadratic", labels=[1, 2, 3, 4, 5])
        )
        assert e["spearman"] == pytest.approx(sps.spearmanr(h, j).statistic)
        assert e["kappa"] == pytest.approx(
            cohen_kappa_score(h >= pass_at, j >= pass_at)
        )  # binary view via pass_at


# ----------------------------------------------------------------------------------------- degenerate data


def test_degenerate_inputs_give_nulls_and_messages_not_exceptions(cli, ws, tmp_path):
    nan = np.full(50, np.nan)
    import_run(cli, ws, "unscored", {"answers_question": nan, "cites_source": nan}, ids=IDS[:50])
    import_run(cli, ws, "left", {"answers_question": np.ones(100)}, ids=IDS[:100])
    import_run(cli, ws, "right", {"answers_question": np.zeros(100)}, ids=IDS[100:200])
    import_labels(cli, ws, "ana", {"answers_question": np.ones(10)}, IDS[:10])

    ct = report_json(
        cli, "crosstab", "--run", "unscored", "--row", "answers_question", "--col", "cites_source"
    )
    assert ct["n"] == 0 and ct["phi"] is None and ct["ratio"] is None
    assert (
        ct["col_fail_rate"] == {"pass": None, "fail": None} and "nothing to cross-tabulate" in ct["message"]
    )

    ph = report_json(cli, "phi", "--run", "unscored", "--n-boot", "200")
    col = ph["columns"][0]
    assert col["n"] == 0 and col["matrix"] == [[None, None], [None, None]] and col["ci_low"][0][1] is None
    assert any("no scored verdicts" in n for n in col["notes"])
    assert ph["audit"][0]["verdict"] == "no human column"

    cmp = report_json(cli, "compare", "left", "right")
    assert cmp["n"] == 0 and "no scored example in common" in cmp["message"]
    assert cmp["criteria"]["answers_question"]["mcnemar_p"] is None
    assert cmp["all_pass_rate"] == {"a": None, "b": None}

    ag = report_json(cli, "agreement", "--run", "unscored", "--annotator", "ana")
    assert (
        ag["criteria"]["answers_question"]["n"] == 0 and ag["criteria"]["answers_question"]["kappa"] is None
    )
    assert "agreement undefined" in ag["message"]

    for args in (
        ("crosstab", "--run", "unscored", "--row", "answers_question", "--col", "cites_source"),
        ("phi", "--run", "unscored", "--n-boot", "200"),
        ("compare", "left", "right"),
        ("agreement", "--run", "unscored", "--annotator", "ana"),
        ("runs",),
    ):
        assert cli("report", *args).exit_code == 0
    # an interval cannot rest on a handful of draws: one line, exit 2, no table
    for args in (("report", "phi", "--run", "unscored"), ("export-report", "--out", tmp_path / "r.md", "--run", "unscored"),
                 ("check", "--run", "unscored", "--min-kappa", "0.5", "--annotator", "ana")):
        r = cli(*args, "--n-boot", "10")
        assert r.exit_code == 2 and r.stdout == "", (args, r.output)
        assert "--n-boot 10: a 95 % interval needs at least 200 draws (with 10, each bound is the most extreme draw" in r.stderr
    assert not (tmp_path / "r.md").exists()

    runs = json.loads(cli("report", "runs", "--format", "json").stdout)
    assert [r["name"] for r in runs] == ["unscored", "left", "right"]

    # every "—" in a table is explained beside it
    text = cli("report", "compare", "left", "right").stdout
    assert "a: undefined — no answer has every criterion scored under run:left" in text
    assert "McNemar p undefined (—) for answers_question: no answer scored by both runs" in text
    a = np.array([0.0] * 5 + [1.0] * 45)
    import_run(cli, ws, "nested", {"answers_question": a, "cites_source": a}, ids=IDS[:50])
    text = cli("report", "crosstab", "--run", "nested", "--row", "answers_question", "--col", "cites_source").stdout
    assert "ratio —" in text and ("note: ratio undefined: cites_source never fails where answers_question passes "
                                  "(0 of 45)") in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("crosstab", "--run", "left", "--human", "--row", "answers_question", "--col", "cites_source"),
            "--run and --human together",
        ),
        (("crosstab", "--row", "answers_question", "--col", "cites_source"), "choose exactly one source"),
        (("crosstab", "--run", "nope", "--row", "a", "--col", "b"), "no run named or numbered 'nope'"),
        (
            ("crosstab", "--run", "left", "--row", "answers_question", "--col", "tone"),
            "criterion 'tone' is not in run:left",
        ),
        (("phi",), "choose at least one source"),
        (("agreement", "--run", "left", "--annotator", "zoe"), "annotator 'zoe' has no labels"),
        (("agreement", "--run", "left", "--human"), "has no human labels"),
        (("agreement", "--run", "left", "--human", "--annotator", "x"), "--annotator and --human together"),
        (("compare", "left", "left"), "two different runs"),
    ],
)
def test_bad_arguments_are_one_line(cli, ws, args, expected):
    import_run(cli, ws, "left", {"answers_question": np.ones(100)}, ids=IDS[:100])
    result = cli("report", *args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr


# ----------------------------------------------------------------------------------------- export-report


def test_export_report_html_and_markdown(cli, ws, tmp_path, session):
    _audit_workspace(cli, ws)
    out = tmp_path / "out" / "report.html"
    result = cli("export-report", "--out", out, "--n-boot", "200")
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert text.count('class="plotly-graph-div"') >= 3  # one heatmap per source (+ the attribution bars)
    assert text.count("plotly.js v") >= 1  # plotly.js inlined: the file is self-contained
    assert "<script src=" not in text
    assert "<script>alert(" not in text and "&lt;script&gt;alert(" in text  # answer text escaped
    for name in ("run:single", "run:split", "human", "(imported)", "Association audit", "Compare run:single"):
        assert name in text
    assert "induced by run:single" in text and "Benjamini" in text and "pooled over" in text

    md = tmp_path / "report.md"
    assert cli("export-report", "--out", md, "--run", "single", "--no-human", "--n-boot", "200").exit_code == 0
    mtext = md.read_text()
    assert "## Phi — run:single" in mtext and "<script>" not in mtext and "&lt;script&gt;" in mtext
    assert "run:split" not in mtext

    rep = reports.build_report(session, ["single", "split"], n_boot=200)
    assert [c.source for c in rep.phi.columns] == ["run:single", "run:split", "human"]
    # the most-shifted pair between the runs is answers_question × cites_source (0.6 vs 0)
    assert (rep.crosstabs[0].row, rep.crosstabs[0].col) == ("answers_question", "cites_source")
    assert figures.render_html(rep).startswith("<!DOCTYPE html>")

    bad = cli("export-report", "--out", tmp_path / "r.pdf")
    assert bad.exit_code == 2 and "must end in .html or .md" in bad.stderr


def test_adjudicator_label_settles_the_consensus(cli, ws, session):
    import_run(cli, ws, "r", {"answers_question": np.ones(N)})
    ana, ben = np.array([1.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0])
    import_labels(cli, ws, "ana", {"answers_question": ana}, IDS[:4])
    import_labels(cli, ws, "ben", {"answers_question": ben}, IDS[:4])
    human = reports.load_human(session, "support")
    np.testing.assert_array_equal(human.binary[:4, 0], [1.0, np.nan, 0.0, np.nan])  # ties unresolved
    import_labels(cli, ws, "cy", {"answers_question": np.array([np.nan, 1.0, 1.0, np.nan])}, IDS[:4])
    from sqlalchemy import update

    session.execute(update(store.Annotator).where(store.Annotator.name == "cy").values(role="adjudicator"))
    settled = reports.load_human(session, "support")
    # cy settles e-001 and overrides the 2-0 majority on e-002; e-003 stays a tie
    np.testing.assert_array_equal(settled.binary[:4, 0], [1.0, 1.0, 1.0, np.nan])
    session.rollback()
