"""The examples × runs grid (judgekit.grid): filters, search and paging checked against the verdict and
label rows themselves, on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from judgekit import grid, reports, store
from tests.conftest import load_demo, simulated_runs

BACKENDS = ("sqlite", "postgresql")
N = 40


@pytest.fixture
def runs(engine, db_url):
    """Demo (40 answers), a single and a split run on the simulated judge, one verdict made unscored, and a
    second annotator ``ana`` on the first 10 answers who fails every answer on ``concise``."""
    names = simulated_runs(load_demo(engine, N), db_url, name="grid-{spec}")
    with Session(engine) as s, s.begin():
        run = store.get_run(s, names[0])
        # an unscored verdict, as the runner stores one (a new row: verdicts are only ever inserted)
        first = s.scalar(select(store.Verdict).where(store.Verdict.run_id == run.id).order_by(store.Verdict.id))
        row = {"run_id": run.id, "example_id": first.example_id, "criterion_id": first.criterion_id, "value": None,
               "rationale": None, "p_pass": None, "red_flags": [], "error": "no JSON object found in reply",
               "call_id": first.call_id}
        s.execute(delete(store.Verdict).where(store.Verdict.id == first.id))
        store.insert_verdicts(s, [row])
        ds = store.get_dataset(s, "demo")
        ids = sorted(store.example_ids(s, ds.id).values())[:10]
        store.upsert_labels(s, [{"example_id": e, "criterion": "concise", "annotator": "ana", "value": 0}
                                for e in ids])
    return names


def columns(s: Session, names: list[str], human: bool = True) -> list[grid.GridColumn]:
    out = []
    for name in names:
        run = store.get_run(s, name)
        src = reports.load_run(s, run)
        sample = np.zeros(len(src.index), dtype=bool)
        sample[src.index.rows_of(np.asarray(store.run_example_ids(s, run.id)))] = True
        out.append(grid.GridColumn(f"run:{run.id}", name, src, sample, done=run.status == "done"))
    if human:
        out.append(grid.GridColumn("human", "human", reports.load_human(s, "demo")))
    return out


def verdicts(s: Session, name: str) -> dict[tuple[str, str], int | None]:
    """(example id, criterion) → stored value, straight from the verdict rows."""
    run = store.get_run(s, name)
    q = (select(store.Example.ext_id, store.CriterionRow.key, store.Verdict.value)
         .join(store.Example, store.Example.id == store.Verdict.example_id)
         .join(store.CriterionRow, store.CriterionRow.id == store.Verdict.criterion_id)
         .where(store.Verdict.run_id == run.id))
    return {(e, k): v for e, k, v in s.execute(q)}


def all_ids(s: Session, cols, query: grid.GridQuery) -> list[str]:
    page = grid.grid_page(s, cols, query, 0, page_size=10_000)
    return page.ids


def test_flips_are_the_answers_where_the_runs_disagree(engine, runs):
    with Session(engine) as s:
        a, b = (verdicts(s, n) for n in runs)
        cols = columns(s, runs)
        got = all_ids(s, cols, grid.GridQuery(("cites_source",), frozenset({"flips"})))
        every = all_ids(s, cols, grid.GridQuery(filters=frozenset({"flips"})))
    expected = sorted(e for (e, k), v in a.items() if k == "cites_source" and v is not None
                      and b.get((e, k)) is not None and v != b[(e, k)])
    assert sorted(got) == expected and expected  # the simulated judge does flip some
    crit = {k for _, k in a}
    assert sorted(every) == sorted({e for (e, k), v in a.items() if k in crit and v is not None
                                    and b.get((e, k)) is not None and v != b[(e, k)]})


def test_disagreement_with_the_humans_counts_only_labelled_answers(engine, runs):
    with Session(engine) as s:
        a, b = (verdicts(s, n) for n in runs)
        labelled = {r["example_id"] for r in store.labels_for_dataset(s, store.get_dataset(s, "demo").id)
                    if r["annotator"] == "ana"}
        got = all_ids(s, columns(s, runs), grid.GridQuery(("concise",), frozenset({"disagrees"})))
    # ana fails every labelled answer on concise: a run disagrees wherever it passes one of them
    expected = sorted(e for e in labelled if a.get((e, "concise")) == 1 or b.get((e, "concise")) == 1)
    assert sorted(got) == expected and expected


def test_unscored_finds_the_verdict_without_a_value_and_says_so(engine, runs):
    with Session(engine) as s:
        a = verdicts(s, runs[0])
        (example, criterion), = [k for k, v in a.items() if v is None]
        cols = columns(s, runs)
        page = grid.grid_page(s, cols, grid.GridQuery((criterion,), frozenset({"unscored"})))
    assert page.ids == [example] and page.total == 1
    assert page.frame.loc[0, runs[0]] == "unscored"
    assert page.frame.loc[0, runs[1]] in ("pass", "fail")


def test_search_paging_and_cell_conditions(engine, runs):
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo").id
        cols = columns(s, runs, human=False)
        every_text = store.example_texts(s, ds, [f"q-{i:04d}" for i in range(1, N + 1)])
        hits = all_ids(s, cols, grid.GridQuery(text="KB-1"))
        upper = all_ids(s, cols, grid.GridQuery(text="TRASH"))  # case-insensitive
        everything = grid.grid_page(s, cols, grid.GridQuery(), page=1, page_size=15)
        last = grid.grid_page(s, cols, grid.GridQuery(), page=99, page_size=15)
        none = grid.grid_page(s, cols, grid.GridQuery(text="surely absent from every answer"))
        a = verdicts(s, runs[0])
        cell = all_ids(s, cols, grid.GridQuery(where=((cols[0].key, "grounded", 0.0), (cols[0].key, "concise", 1.0))))
    assert sorted(hits) == sorted(e for e, t in every_text.items() if "KB-1" in " ".join(t)) and hits
    assert sorted(upper) == sorted(e for e, t in every_text.items() if "trash" in " ".join(t).lower()) and upper
    assert everything.total == N and everything.pages == 3 and everything.page == 1
    assert everything.ids == [f"q-{i:04d}" for i in range(16, 31)]
    assert last.page == 2 and len(last.ids) == N - 30  # a page past the end shows the last one
    assert none.total == 0 and none.pages == 1
    assert sorted(cell) == sorted(e for (e, k), v in a.items() if k == "grounded" and v == 0
                                  and a.get((e, "concise")) == 1)


def test_several_criteria_name_the_failures_by_number(engine, runs):
    with Session(engine) as s:
        cols = columns(s, runs)
        page = grid.grid_page(s, cols, grid.GridQuery(), page=0, page_size=N)
        a = verdicts(s, runs[1])
    keys = list(page.criteria)
    for row, e in enumerate(page.ids):
        failed = [str(j + 1) for j, k in enumerate(keys) if a.get((e, k)) == 0]
        cell = page.frame.loc[row, runs[1]]
        assert cell == (f"fail {','.join(failed)}" if failed else "all pass")
    human = page.frame["human"]
    assert (human[10:] == "").all()  # reference is left out of the human column: only ana's 10 count
    assert all(c.startswith("fail") or c.startswith("unresolved") for c in human[:10])


def test_store_search_escapes_wildcards(engine, runs):
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo").id
        assert store.search_examples(s, ds, "%") == []  # a literal percent sign, not "anything"
        assert store.search_examples(s, ds, "q_00") == []  # a literal underscore, not any character
        assert len(store.search_examples(s, ds, "q-00")) == N
