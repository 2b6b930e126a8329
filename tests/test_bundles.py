"""Bundles and seed 002's holistic call on SQLite and PostgreSQL: grouping and listing, the evidence block
built from stored verdicts (byte for byte, never answer text), the store and migration 0006, bundle-level runs
through the runner over real HTTP (single and split, unscored replies, the runaway guard, resume), the
bundle-level K.O. / reconciliation and A/B reports computed by hand, and the CLI's one-line errors.
(Pure parts, the simulated judge and the demo A/B: tests/test_holistic.py.)"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import delete, func, insert, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from judgekit import bundle_report, bundles, holistic, runner, store
from judgekit.harness import parse_harness
from judgekit.rubric import KORule
from tests.browser import ROOT
from tests.scripted_server import ScriptedServer, ok, slow, status

BACKENDS = ("sqlite", "postgresql")

# ------------------------------------------------------------------------------------------ workspace

ROWS = [
    {"id": "a1", "answer": "SECRET-ANSWER-1 delete everything", "model": "m1", "pack": "p1", "category": "safety"},
    {"id": "a2", "answer": "SECRET-ANSWER-2", "model": "m1", "pack": "p1", "category": "style"},
    {"id": "a3", "answer": "SECRET-ANSWER-3", "model": "m1", "pack": "p2", "category": "billing"},
    {"id": "a4", "answer": "SECRET-ANSWER-4", "model": "m2", "pack": "p1"},
    {"id": "a5", "answer": "SECRET-ANSWER-5", "model": "m2", "pack": "p2", "category": "billing"},
    {"id": "a6", "answer": "SECRET-ANSWER-6", "pack": "p1"},  # no model: in no bundle by model
]
RUBRIC = """name: holo
criteria:
  - key: quality
    question: How good is the answer?
    kind: scale
    levels: {1: bad, 2: weak, 3: fair, 4: good, 5: great}
  - key: safety
    question: How safe is the answer?
    kind: scale
    levels: {1: harmful, 2: risky, 3: acceptable, 4: careful, 5: exemplary}
ko_rule: {criterion: safety, floor: 2}
bundle_ko_rules:
  pack:
    p2: {criterion: quality, floor: 2}
"""
# per-answer verdicts of run `answers`: example → criterion → (value, rationale, red flags)
PER_ANSWER = {
    "a1": {"quality": (3, "Deletes files\nwithout asking.", []), "safety": (1, "Unsafe.", ["unsafe advice: deletes files"])},
    "a2": {"quality": (4, "Wordy.", ["too terse"]), "safety": (5, "Fine.", [])},
    "a3": {"quality": (2, "Wrong plan price.", []), "safety": (4, "ok", [])},
    "a4": {"quality": (None, None, []), "safety": (None, None, [])},  # unscored: left out of the evidence
    "a5": {"quality": (5, "Right.", []), "safety": (5, "Fine.", [])},
    "a6": {"quality": (4, "Good.", []), "safety": (4, "Good.", [])},
}


@pytest.fixture
def packs(engine, tmp_path, cli):
    (tmp_path / "packs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    (tmp_path / "holo.yaml").write_text(RUBRIC, encoding="utf-8")
    assert cli("import-dataset", tmp_path / "packs.jsonl", "--name", "packs").exit_code == 0
    assert cli("import-rubric", tmp_path / "holo.yaml").exit_code == 0
    with Session(engine) as s, s.begin():
        ds, rubric = store.get_dataset(s, "packs"), store.get_rubric_row(s, "holo")
        judge = store.get_or_create_judge(s, kind="imported", name="hand")
        ids = store.example_ids(s, ds.id)
        run = store.create_run(s, name="answers", dataset=ds, rubric=rubric, judge=judge,
                               harness={"kind": "single"}, example_ids=list(ids.values()), status="done")
        crit = {c.key: c.id for c in store.criterion_rows(s, rubric.id)}
        store.insert_verdicts(s, [
            {"run_id": run.id, "example_id": ids[e], "criterion_id": crit[k], "value": v, "rationale": r,
             "p_pass": None, "red_flags": f, "error": None, "call_id": None}
            for e, dims in PER_ANSWER.items() for k, (v, r, f) in dims.items()])
    return engine


EXPECTED_EVIDENCE = {
    "m1 · p1": [
        "[safety] a1: quality 3, safety 1 · RED FLAG — unsafe advice: deletes files — Unsafe.",
        "[style] a2: quality 4, safety 5 · RED FLAG — too terse — Wordy.",
    ],
    "m1 · p2": ["[billing] a3: quality 2, safety 4 — Wrong plan price."],
    "m2 · p2": ["[billing] a5: quality 5, safety 5 — Right."],
}


def test_bundles_group_store_once_and_list(packs, cli):
    with Session(packs) as s, s.begin():
        first = bundles.ensure_bundles(s, "packs", ["model", "pack"])
        again = bundles.ensure_bundles(s, "packs", ["model", "pack"])
        assert [b.id for b in first] == [b.id for b in again]  # stored once
        assert [(b.label, b.size) for b in first] == [("m1 · p1", 2), ("m1 · p2", 1), ("m2 · p1", 1), ("m2 · p2", 1)]
        with pytest.raises(ValueError, match="no answer of dataset 'packs' has metadata field 'colour'"):
            bundles.ensure_bundles(s, "packs", ["colour"])
    r = cli("bundles", "--dataset", "packs", "--bundle-by", "model", "--bundle-by", "pack", "--rubric", "holo",
            "--from-run", "answers", "--format", "json")
    assert r.exit_code == 0, r.output
    rows = {b["bundle"]: b for b in json.loads(r.stdout)["bundles"]}
    assert rows["m1 · p2"]["ko_rule"] == {"criterion": "quality", "floor": 2}  # the pack's own rule
    assert rows["m1 · p1"]["ko_rule"] == {"criterion": "safety", "floor": 2}
    assert rows["m2 · p1"]["evidence_lines"] == 0 and rows["m1 · p1"]["evidence_lines"] == 2
    assert rows["m1 · p1"]["categories"] == {"safety": 1, "style": 1}
    table = cli("bundles", "--dataset", "packs", "--bundle-by", "model", "--bundle-by", "pack", "--rubric", "holo")
    assert "m1 · p2" in table.stdout and "quality ≤ 2" in table.stdout
    listing = cli("list").stdout
    assert "bundles  packs" in listing and "by model + pack: 4 bundles (5 answers)" in listing


def test_evidence_from_the_store(packs):
    with Session(packs) as s:
        rows = {b.label: b.id for b in bundles.ensure_bundles(s, "packs", ["model", "pack"])}
        ev = bundles.bundle_evidence(s, store.get_run(s, "answers"), list(rows.values()))
    assert {label: list(ev[i].lines) for label, i in rows.items() if ev[i].lines} == EXPECTED_EVIDENCE
    assert ev[rows["m2 · p1"]].omitted == 1 and not ev[rows["m2 · p1"]].lines
    assert ev[rows["m1 · p1"]].flags == (("a1", "unsafe advice: deletes files"), ("a2", "too terse"))


# ------------------------------------------------------------------------------------------ runs over HTTP


def _scripted(replies: dict[str, dict]):
    """A judge that answers each holistic call from ``replies[bundle label]`` (only the asked dimensions)."""
    def answer(index: int, body: dict):
        req = holistic.parse_bundle_request(body["messages"])
        assert req is not None
        asked = [d.key for d in req.dimensions]
        return ok({k: v for k, v in replies[req.label].items() if k in asked})
    return answer


REPLIES = {
    # m1·p1: a safety red flag in the evidence, the K.O. dimension (safety) above its floor → contradictory
    "m1 · p1": {"quality": {"verdict": 3, "rationale": "a2 rambles.", "red_flags": ["rambling structure"]},
                "safety": {"verdict": 4, "rationale": "Mostly careful, see a1.", "red_flags": []}},
    # m1·p2: the pack's own rule (quality ≤ 2) disqualifies it
    "m1 · p2": {"quality": {"verdict": 2, "rationale": "a3 quotes a wrong price.", "red_flags": []},
                "safety": {"verdict": 5, "rationale": "Fine.", "red_flags": []}},
    "m2 · p2": {"quality": {"verdict": 5, "rationale": "a5 right.", "red_flags": []},
                "safety": {"verdict": 5, "rationale": "Fine.", "red_flags": []}},
}


def _bundle_run(engine, base_url: str, name: str, spec: str = "single", variant: str = "default", **judge) -> str:
    with Session(engine) as s, s.begin():
        return bundles.create_bundle_run(
            s, from_run="answers", bundle_by=["model", "pack"], dataset="packs", rubric="holo",
            harness=parse_harness(spec, prompt_variant=variant),
            judge=runner.JudgeSpec(base_url=base_url, model="scripted", **judge), name=name).name


def test_single_holistic_run_one_call_per_bundle_evidence_and_no_answer_text(packs):
    with ScriptedServer(_scripted(REPLIES)) as srv:
        name = _bundle_run(packs, srv.base_url, "holo-single", max_tokens=333, timeout_s=7.5)
        summary = runner.run_sync(packs, name, concurrency=2)
        assert summary.status == "done" and summary.calls_sent == 3 == len(srv.requests)  # m2·p1 has no evidence
        for r in srv.requests:
            prompt = json.dumps(r.body["messages"], ensure_ascii=False)
            assert "SECRET-ANSWER" not in prompt  # the holistic call never carries answer text
            assert r.body["max_tokens"] == 333  # the runaway guard
            req = holistic.parse_bundle_request(r.body["messages"])
            user = r.body["messages"][1]["content"]
            evidence = user.split("\n\n## Evidence\n", 1)[1].split("\n\n## Dimensions\n", 1)[0].split("\n")[1:]
            assert evidence == EXPECTED_EVIDENCE[req.label]  # byte for byte, from the stored verdicts
            assert [d.key for d in req.dimensions] == ["quality", "safety"]
            ko = {d.key: d.ko_floor for d in req.dimensions}
            assert ko == ({"quality": 2, "safety": None} if req.label.endswith("p2") else {"quality": None, "safety": 2})
            assert "disqualifies the bundle." in user
        again = runner.run_sync(packs, name)  # resume: every bundle is judged
        assert again.calls_sent == 0 and len(srv.requests) == 3
    with Session(packs) as s:
        run = store.get_run(s, name)
        calls = s.scalars(select(store.Call).where(store.Call.run_id == run.id)).all()
        assert all(c.example_id is None and c.bundle_id is not None for c in calls)
        assert s.scalar(select(func.count()).select_from(store.Verdict).where(store.Verdict.run_id == run.id)) == 0
        v = bundles.load_bundle_verdicts(s, name)
        assert v.labels == ("m1 · p1", "m1 · p2", "m2 · p2")
        assert v.values.tolist() == [[3, 4], [2, 5], [5, 5]]
        assert v.ko_rules == (KORule("safety", 2), KORule("quality", 2), KORule("quality", 2))
        listed = {r["name"]: r for r in store.list_runs(s)}[name]
        assert (listed["level"], listed["bundles"], listed["verdicts"], listed["scored"]) == ("bundle", 3, 6, 6)
        assert listed["harness"].startswith("bundle:single")


def test_split_holistic_run_one_call_per_dimension_and_unscored_replies(packs):
    def answer(index: int, body: dict):
        req = holistic.parse_bundle_request(body["messages"])
        if req.label == "m1 · p2":  # a reply that is not clearly a value: unscored, never a fail
            return ok("I think it is quite good overall.")
        return _scripted(REPLIES)(index, body)

    with ScriptedServer(answer) as srv:
        name = _bundle_run(packs, srv.base_url, "holo-split", "split", "hardened")
        summary = runner.run_sync(packs, name, concurrency=3)
        assert summary.status == "done" and len(srv.requests) == 6 and summary.unscored == 2
        asked = sorted((holistic.parse_bundle_request(r.body["messages"]).label,
                        tuple(d.key for d in holistic.parse_bundle_request(r.body["messages"]).dimensions))
                       for r in srv.requests)
        assert asked == sorted((b, (k,)) for b in REPLIES for k in ("quality", "safety"))
        system = srv.requests[0].body["messages"][0]["content"]
        assert holistic.HOLISTIC_RULES in system and "three to four sentences" in system
    with Session(packs) as s:
        v = bundles.load_bundle_verdicts(s, name)
        row = v.labels.index("m1 · p2")
        assert all(math.isnan(x) for x in v.values[row])
        errors = s.scalars(select(store.BundleVerdict.error).where(store.BundleVerdict.value.is_(None))).all()
        assert len(errors) == 2 and all(errors)


def test_failed_calls_are_resumed_exactly_once(packs):
    # the endpoint fails every call after the first: the breaker stops the run; resume finishes it
    with ScriptedServer(lambda i, body: _scripted(REPLIES)(i, body) if i == 0 else status(500)) as bad:
        name = _bundle_run(packs, bad.base_url, "holo-resume", max_retries=0)
        first = runner.run_sync(packs, name, concurrency=1, breaker=2)
        assert first.status == "failed" and first.calls_sent == 3
    with ScriptedServer(_scripted(REPLIES)) as good:
        with Session(packs) as s, s.begin():
            s.get(store.Judge, store.get_run(s, name).judge_id).base_url = good.base_url
        again = runner.run_sync(packs, name, concurrency=2)
        assert again.status == "done" and again.calls_sent == 2 == len(good.requests)
    with Session(packs) as s:
        run = store.get_run(s, name)
        keys = s.execute(select(store.BundleVerdict.bundle_id, store.BundleVerdict.criterion_id)
                         .where(store.BundleVerdict.run_id == run.id)).all()
        assert len(keys) == len(set(keys)) == 6


def test_runaway_guard_times_out_a_slow_holistic_call(packs):
    with ScriptedServer(lambda i, body: slow(5.0, REPLIES["m1 · p1"])) as srv:
        name = _bundle_run(packs, srv.base_url, "holo-slow", timeout_s=0.3, max_retries=0)
        summary = runner.run_sync(packs, name, concurrency=3, breaker=0)
    assert summary.status == "incomplete" and summary.failed_calls == 3
    with Session(packs) as s:
        calls = s.scalars(select(store.Call).where(store.Call.run_id == store.get_run(s, name).id)).all()
        assert all(c.status == "error" for c in calls) and len(calls) == 3


# ------------------------------------------------------------------------------------------ reports by hand


def test_bundle_ko_report_by_hand(packs, cli):
    with ScriptedServer(_scripted(REPLIES)) as srv:
        name = _bundle_run(packs, srv.base_url, "holo-ko")
        runner.run_sync(packs, name)
    with Session(packs) as s:
        rep = bundle_report.ko_report(s, name)
    # m1·p1 safety 4 > 2 with "unsafe advice" in its evidence → contradictory ("too terse", "rambling structure"
    # are format-only: set aside); m1·p2 quality 2 ≤ 2 under its pack rule → disqualified; m2·p2 clean.
    assert (rep.n, rep.disqualified.k, rep.flagged, len(rep.contradictions)) == (3, 1, 1, 1)
    assert rep.disqualified_rows[0]["bundle"] == "m1 · p2" and rep.disqualified_rows[0]["criterion"] == "quality"
    c = rep.contradictions[0]
    assert (c["bundle"], c["criterion"], c["ko_score"]) == ("m1 · p1", "safety", 4)
    assert [(x["where"], x["prompt_id"]) for x in c["signals"]] == [("evidence", "a1")]
    assert rep.format_only_flags == 2 and (rep.reconciled.k, rep.reconciled.n) == (0, 1)
    r = cli("report", "ko", "--run", name, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["reconciliation"]["contradictory"] == 1


def test_bundle_ab_report_by_hand(packs, cli):
    hardened = {k: dict(v) for k, v in REPLIES.items()}
    hardened["m1 · p1"] = {**REPLIES["m1 · p1"], "safety": {"verdict": 2, "rationale": "a1 deletes files.",
                                                           "red_flags": []}}
    reference = {k: dict(v) for k, v in hardened.items()}
    reference["m2 · p2"] = {**hardened["m2 · p2"], "quality": {"verdict": 3, "rationale": "a5.", "red_flags": []}}
    for run_name, replies, variant in (("ab-a", REPLIES, "default"), ("ab-b", hardened, "hardened"),
                                       ("ab-ref", reference, "hardened")):
        with ScriptedServer(_scripted(replies)) as srv:
            _bundle_run(packs, srv.base_url, run_name, variant=variant)
            runner.run_sync(packs, run_name)
    r = cli("report", "ab", "ab-a", "ab-b", "--reference", "ab-ref", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["n"] == 3 and d["strength"].startswith("directional, not hard: n = 3 bundles")
    # safety: b − a = (2 − 4, 0, 0) → mean −2/3; |a − ref| = (2, 0, 0) → 2/3, |b − ref| = 0
    assert d["dimensions"]["safety"]["shift"]["value"] == pytest.approx(-2 / 3)
    assert d["dimensions"]["safety"]["shift"]["ci"] == [None, None]  # 3 bundles: no interval, said why
    assert "an interval needs at least 10" in d["dimensions"]["safety"]["shift"]["note"]
    assert d["dimensions"]["safety"]["mad"]["a"]["value"] == pytest.approx(2 / 3)
    assert d["dimensions"]["safety"]["mad"]["b"]["value"] == pytest.approx(0.0)
    # quality: both 2 off the reference (5 vs 3) on m2·p2 only → 2/3 each; pooled over 6 cells: a (2 + 2)/6,
    # b (0 + 2)/6
    assert d["dimensions"]["quality"]["mad"]["a"]["value"] == pytest.approx(2 / 3)
    assert d["dimensions"]["quality"]["mad"]["diff"]["value"] == pytest.approx(0.0)
    assert d["overall"]["mad"]["a"]["value"] == pytest.approx(4 / 6)
    assert d["overall"]["mad"]["b"]["value"] == pytest.approx(2 / 6)
    # K.O.: a disqualifies m1·p2 only; b and the reference also m1·p1 → concordance 2/3, b agrees 3/3
    ko = d["ko"]
    assert (ko["disqualified"]["a"]["k"], ko["disqualified"]["b"]["k"], ko["disqualified"]["reference"]["k"]) == (1, 2, 2)
    assert (ko["concordance"]["k"], ko["concordance"]["n"]) == (2, 3)
    assert (ko["reference_agreement"]["a"]["k"], ko["reference_agreement"]["b"]["k"]) == (2, 3)
    assert ko["reconciliation"]["a"]["contradictory"] == 1 and ko["reconciliation"]["b"]["contradictory"] == 0
    assert d["cost"]["a"]["calls"] == 3 and d["bundles"][0]["safety"] == {"a": 4, "b": 2, "reference": 2}
    table = cli("report", "ab", "ab-a", "ab-b", "--reference", "ab-ref").stdout
    assert "directional, not hard" in table and "K.O. per bundle" in table
    for args, message in [(("ab-a", "answers"), "one is bundle-level"),
                          (("ab-a", "ab-b", "--annotator", "x"), "no human labels per bundle"),
                          (("ab-a", "ab-a"), "two different runs")]:
        bad = cli("report", "ab", *args)
        assert bad.exit_code == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------ CLI errors


def test_run_level_bundle_cli_errors_write_nothing(packs, cli):
    base = ("--dataset", "packs", "--rubric", "holo", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
            "--judge-kind", "openai", "--level", "bundle")
    with Session(packs) as s:
        before = store.row_counts(s)
    for args, message in [
        ((), "needs --from-run"),
        (("--from-run", "answers"), "needs --bundle-by"),
        (("--from-run", "answers", "--bundle-by", "model", "--sample", "2"), "--sample applies to per-answer"),
        (("--from-run", "answers", "--bundle-by", "model", "--harness", "grouped:quality|safety"), "single or split"),
        (("--from-run", "answers", "--bundle-by", "model", "--prompt-variant", "wild"), "unknown holistic prompt variant"),
        (("--from-run", "nope", "--bundle-by", "model"), "no run named"),
        (("--from-run", "answers", "--bundle-by", "colour"), "has metadata field 'colour'"),
        (("--from-run", "answers", "--bundle-by", "model", "--bundle-by", "model"), "names a field twice"),
        (("--from-run", "answers", "--bundle-by", "model", "--shuffle"), "no --shuffle"),
    ]:
        r = cli("run", *base, *args)
        assert r.exit_code == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    r = cli("run", *base[:-2], "--bundle-by", "model")
    assert r.exit_code == 2 and "apply to --level bundle" in r.stderr
    with Session(packs) as s:
        after = store.row_counts(s)
    assert after == before


# ------------------------------------------------------------------------------------------ store and migration


def test_bundle_verdicts_unique_and_deleted_with_their_run(packs):
    with ScriptedServer(_scripted(REPLIES)) as srv:
        name = _bundle_run(packs, srv.base_url, "holo-store")
        runner.run_sync(packs, name)
    with Session(packs) as s:
        run = store.get_run(s, name)
        row = s.scalars(select(store.BundleVerdict).where(store.BundleVerdict.run_id == run.id)).first()
        dup = {"run_id": run.id, "bundle_id": row.bundle_id, "criterion_id": row.criterion_id, "value": 1,
               "red_flags": []}
    with pytest.raises(IntegrityError), Session(packs) as s, s.begin():
        s.execute(insert(store.BundleVerdict), [dup])
    with Session(packs) as s, s.begin():
        store.delete_run(s, store.get_run(s, name))
    with Session(packs) as s:
        counts = store.row_counts(s)
        assert counts["bundle_verdicts"] == 0 and counts["run_bundles"] == 0
        assert counts["bundles"] == 4 and counts["bundle_examples"] == 5  # the grouping stays


NEW_TABLES = {"bundles", "bundle_examples", "run_bundles", "bundle_verdicts"}


def test_migration_0006_on_a_blank_database(db_url):
    engine = store.make_engine(db_url)
    assert store.upgrade(engine) is True
    insp = inspect(engine)
    assert set(insp.get_table_names()) >= NEW_TABLES
    calls = {c["name"]: c for c in insp.get_columns("calls")}
    assert calls["example_id"]["nullable"] and "bundle_id" in calls
    assert "bundle_ko_rules" in {c["name"] for c in insp.get_columns("rubrics")}


def test_migration_0006_from_the_previous_schema_keeps_data(db_url):
    """0005 → head on a database holding a run with calls and verdicts: every row and every verdict's call
    survive (on SQLite `calls` is recreated: with foreign keys on, that would null verdicts.call_id)."""
    engine = store.make_engine(db_url)
    store.upgrade(engine, "0005_hardening")
    stmts = [
        "INSERT INTO datasets (id, name, created_at) VALUES (1, 'd', '2026-01-01')",
        "INSERT INTO examples (id, dataset_id, ext_id, question, context, answer, metadata) "
        "VALUES (1, 1, 'e1', 'q', 'c', 'a', '{\"model\": \"m\"}')",
        "INSERT INTO rubrics (id, name, description, ko_criterion, ko_floor, created_at) "
        "VALUES (1, 'r', '', 'c', 2, '2026-01-01')",
        "INSERT INTO criteria (id, rubric_id, position, key, question, kind, levels, pass_at) "
        "VALUES (1, 1, 0, 'c', 'q', 'scale', '{}', 3)",
        "INSERT INTO judges (id, name, kind, params, suppress_thinking) VALUES (1, 'j', 'imported', '{}', false)",
        "INSERT INTO runs (id, name, dataset_id, rubric_id, judge_id, harness, sample, status, created_at, wall_s, "
        "totals) VALUES (1, 'r1', 1, 1, 1, '{}', '{}', 'done', '2026-01-01', 0, '{}')",
        "INSERT INTO calls (id, run_id, example_id, criteria, attempts, status, request, created_at) "
        "VALUES (7, 1, 1, '[\"c\"]', 1, 'ok', '{}', '2026-01-01')",
        "INSERT INTO verdicts (id, run_id, example_id, criterion_id, value, red_flags, call_id) "
        "VALUES (3, 1, 1, 1, 4, '[]', 7)",
    ]
    with engine.begin() as conn:
        for sql in stmts:
            conn.execute(text(sql))
    assert store.upgrade(engine) is True
    assert store.current_revision(engine) == store.head_revision()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id, call_id, value FROM verdicts")).all() == [(3, 7, 4)]
        assert conn.execute(text("SELECT id, example_id, bundle_id FROM calls")).all() == [(7, 1, None)]
    with Session(engine) as s:
        rubric = store.load_rubric(s, "r")
        assert rubric.ko_rule == KORule("c", 2) and rubric.bundle_ko_rules == {}
        run = store.get_run(s, "r1")
        assert store.run_level(run) == "answer" and store.list_runs(s)[0]["verdicts"] == 1
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1  # back on after the migration
    # and back: 0006's downgrade returns to the previous schema with the per-answer rows intact
    from alembic import command

    command.downgrade(store._alembic_config(engine), "0005_hardening")
    assert not NEW_TABLES & set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id, call_id FROM verdicts")).all() == [(3, 7)]
    engine.dispose()


def test_delete_dataset_rows_cascade_to_bundles(packs):
    with Session(packs) as s, s.begin():
        bundles.ensure_bundles(s, "packs", ["model"])
        assert {b["fields"][0] for b in bundles.groupings(s)} == {"model"}
        s.execute(delete(store.Dataset).where(store.Dataset.name == "packs"))
    with Session(packs) as s:
        assert store.row_counts(s)["bundles"] == 0


def test_demo_rubric_gives_billing_its_own_ko_rule(engine):
    from tests.conftest import load_demo

    load_demo(engine, 100)
    with Session(engine) as s:
        rubric = store.load_rubric(s, "demo-scale")
        assert rubric.ko_rule_for({"model": "atlas-s", "pack": "billing"}) == KORule("correctness", 2)
        assert rubric.ko_rule_for({"model": "atlas-s", "pack": "sync"}) == KORule("safety", 2)
        meta = s.scalars(select(store.Example.meta)).all()
    assert all({"model", "pack", "category"} <= set(m) for m in meta)


@pytest.mark.sqlite_only
def test_sigkill_mid_holistic_run_then_resume_loses_nothing(engine, db_url, tmp_path, cli):
    """`judgekit resume` of a split bundle-level run killed mid-run: the final verdict set is exact, and
    each kill repeats at most `concurrency` calls (the runner's crash guarantee, at the bundle level)."""
    rows = [{"id": f"x{i:03d}", "answer": f"answer {i}", "model": f"m{i % 60:02d}", "category": "c"} for i in range(240)]
    (tmp_path / "many.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "holo.yaml").write_text(RUBRIC, encoding="utf-8")
    assert cli("import-dataset", tmp_path / "many.jsonl", "--name", "many").exit_code == 0
    assert cli("import-rubric", tmp_path / "holo.yaml").exit_code == 0
    with Session(engine) as s, s.begin():
        ds, rubric = store.get_dataset(s, "many"), store.get_rubric_row(s, "holo")
        ids = list(store.example_ids(s, ds.id).values())
        run = store.create_run(s, name="answers", dataset=ds, rubric=rubric, harness={"kind": "single"},
                               judge=store.get_or_create_judge(s, kind="imported", name="hand"), example_ids=ids,
                               status="done")
        store.insert_verdicts(s, [{"run_id": run.id, "example_id": e, "criterion_id": c.id, "value": 4,
                                   "rationale": "fine", "red_flags": []}
                                  for e in ids for c in store.criterion_rows(s, rubric.id)])
    concurrency = 8
    with ScriptedServer(default=slow(0.02)) as srv:
        with Session(engine) as s, s.begin():
            name = bundles.create_bundle_run(
                s, from_run="answers", bundle_by=["model"], dataset="many", rubric="holo",
                harness=parse_harness("split"), judge=runner.JudgeSpec(base_url=srv.base_url, model="m")).name
        proc = subprocess.Popen([sys.executable, "-m", "judgekit.cli", "resume", name, "--concurrency",
                                 str(concurrency)], cwd=ROOT, env={**os.environ, "JUDGEKIT_DB_URL": db_url},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        stored = 0
        while time.monotonic() < deadline and proc.poll() is None and stored < 60:
            with Session(engine) as s:
                stored = s.scalar(select(func.count()).select_from(store.Call))
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with Session(engine) as s:
            stored = s.scalar(select(func.count()).select_from(store.Call))
        assert 0 < stored < 120, "the kill must land mid-run"
        lost = len(srv.requests) - stored
        final = runner.run_sync(engine, name, concurrency=concurrency)
        served = len(srv.requests)
    assert final.status == "done" and 0 <= lost <= concurrency
    with Session(engine) as s:
        run = store.get_run(s, name)
        keys = s.execute(select(store.BundleVerdict.bundle_id, store.BundleVerdict.criterion_id)
                         .where(store.BundleVerdict.run_id == run.id)).all()
        bundle_ids = s.scalars(select(store.RunBundle.bundle_id).where(store.RunBundle.run_id == run.id)).all()
        crits = [c.id for c in store.criterion_rows(s, run.rubric_id)]
    assert sorted(keys) == sorted((b, c) for b in bundle_ids for c in crits)  # exact: 60 bundles × 2 dimensions
    assert served - 120 == lost


def test_bundle_values_are_compared_in_nfc_and_blank_ones_name_no_bundle(cli, engine, tmp_path):
    rows = [{"id": "a", "answer": "x", "model": "caf\u00e9"}, {"id": "b", "answer": "y", "model": "cafe\u0301 "},
            {"id": "c", "answer": "z", "model": ""}, {"id": "d", "answer": "w", "model": "  "},
            {"id": "e", "answer": "v", "model": 7}, {"id": "f", "answer": "u", "model": "7"}]
    (tmp_path / "nfc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert cli("import-dataset", tmp_path / "nfc.jsonl", "--name", "nfc").exit_code == 0
    with Session(engine) as s, s.begin():
        got = [(b.label, b.size) for b in bundles.ensure_bundles(s, "nfc", ["model"])]
    assert sorted(got) == [("7", 2), ("caf\u00e9", 2)]  # one café; "" and "  " belong to no bundle
