"""Import speed: `judgekit import-dataset`'s path (parse + bulk insert) vs a row-by-row ORM insert.

Both write the same 100k generated examples (the demo generator) into fresh SQLite files, side by
side in one run. The judgekit path includes parsing and validating the JSONL file; the baseline gets
the rows already parsed and adds one ORM object per row (``session.add``) with a flush per row, as a
naive importer would. Target: ratio ≥ 5. Run: ``python bench/import_bench.py [--rows 100000] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy.orm import Session  # noqa: E402

from judgekit import datasets, demo, imports, store  # noqa: E402


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(
                json.dumps(
                    {
                        "id": r["id"],
                        "question": r["question"],
                        "context": r["context"],
                        "answer": r["answer"],
                        **r["metadata"],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )


def judgekit_import(url: str, path: Path) -> float:
    engine = store.make_engine(url)
    store.upgrade(engine)
    t0 = time.perf_counter()
    with Session(engine) as s, s.begin():
        imports.import_dataset(s, path, "bench")
    elapsed = time.perf_counter() - t0
    engine.dispose()
    return elapsed


def orm_row_by_row(url: str, path: Path) -> float:
    engine = store.make_engine(url)
    store.upgrade(engine)
    rows = datasets.parse_dataset(path)  # parsing is not charged to the baseline
    t0 = time.perf_counter()
    with Session(engine) as s, s.begin():
        ds = store.Dataset(name="bench")
        s.add(ds)
        s.flush()
        for r in rows:
            s.add(
                store.Example(
                    dataset_id=ds.id,
                    ext_id=r["id"],
                    question=r["question"],
                    context=r["context"],
                    answer=r["answer"],
                    meta=r["metadata"],
                )
            )
            s.flush()
    elapsed = time.perf_counter() - t0
    engine.dispose()
    return elapsed


def run(quick: bool = False, rows: int = 100_000) -> dict:
    rows = 10_000 if quick else rows
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        path = tmpdir / "bench.jsonl"
        write_jsonl(path, demo.build_demo(n_examples=rows).examples)
        fast = judgekit_import(f"sqlite:///{tmpdir / 'fast.sqlite'}", path)
        slow = orm_row_by_row(f"sqlite:///{tmpdir / 'slow.sqlite'}", path)
        size_mb = path.stat().st_size / 1e6
    return {
        "rows": rows,
        "file_mb": size_mb,
        "judgekit_s": fast,
        "orm_row_by_row_s": slow,
        "ratio": slow / fast,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    r = run(quick=args.quick, rows=args.rows)
    print(f"{r['rows']} examples ({r['file_mb']:.1f} MB JSONL)")
    print(f"  judgekit import-dataset (parse + validate + bulk insert)  {r['judgekit_s']:7.2f} s")
    print(f"  row-by-row ORM insert (add + flush per row)              {r['orm_row_by_row_s']:7.2f} s")
    print(
        f"RESULT import_ratio={r['ratio']:.1f} target=5 holds={str(r['ratio'] >= 5).lower()} "
        f"judgekit_s={r['judgekit_s']:.2f} orm_s={r['orm_row_by_row_s']:.2f}"
    )


if __name__ == "__main__":
    main()
