"""Dashboard pages at scale: 100k examples and 4 runs (2.4M verdicts) — first render, cached re-render,
and the peak memory of the process rendering them.

Each page is rendered in a fresh Python process (AppTest, the same script run a Streamlit server does)
that has imported the libraries and checked the schema, as a server has after its first request; the
first render is cold otherwise: nothing in Streamlit's caches, the sources loaded from the store. The second and third
renders hit Streamlit's caches. The process reports its peak resident memory (VmHWM) after all three.
Targets: first render ≤ 3 s, cached re-render ≤ 0.5 s, peak ≤ 600 MB.

The database (demo with 100k examples + 4 synthetic runs) is built once into bench/out/ and reused.
Run: ``python bench/pages_bench.py [--quick] [--rebuild]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"
PAGES = ["pages/workspace.py", "pages/crosstabs.py", "pages/associations.py", "pages/compare.py",
         "pages/agreement.py", "pages/examples.py",
         # the examples × runs grid, filtered and searched on the server (a page of 25 rows is all that is sent)
         "pages/examples.py?filter=flips&filter=disagrees&criteria=cites_source",
         "pages/examples.py?q=refund&page=3"]
TARGETS = {"first_s": 3.0, "cached_s": 0.5, "peak_mb": 600.0}
RENDER = r"""
import json, os, sys, time
from streamlit.testing.v1 import AppTest
# what a running server has already paid once, at its first request: imports and the schema check
import plotly.graph_objects, pandas, judgekit.ui, judgekit.reports, judgekit.store
judgekit.store.engine_for()
page, _, query = sys.argv[1].partition("?")
at = AppTest.from_file(os.path.join(sys.argv[2], "app.py"), default_timeout=300)
at.switch_page(page)  # straight to the page: its first run is the cold render
params = {}
for part in filter(None, query.split("&")):  # a shared link's choices
    key, _, value = part.partition("=")
    params.setdefault(key, []).append(value)
for key, values in params.items():
    at.query_params[key] = values if len(values) > 1 else values[0]
times = []
for _ in range(3):
    t = time.perf_counter(); at.run(); times.append(time.perf_counter() - t)
errors = [str(e.value)[:300] for e in at.exception]
# VmHWM: this process's own peak (ru_maxrss would carry the parent's peak across exec on Linux)
peak_mb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"page": sys.argv[1], "times": times, "errors": errors, "peak_mb": peak_mb}))
"""


def build(path: Path, n_examples: int) -> None:
    """Demo dataset + 4 runs whose verdicts are the planted truth with 10–25 % flips."""
    import numpy as np
    from sqlalchemy import insert, select
    from sqlalchemy.orm import Session

    from judgekit import imports, store

    path.unlink(missing_ok=True)
    engine = store.engine_for(f"sqlite:///{path}")
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=n_examples)
    rng = np.random.default_rng(0)
    with Session(engine) as s, s.begin():
        ds = store.get_dataset(s, "demo")
        rubric = store.get_rubric_row(s, "demo")
        crits = store.criterion_rows(s, rubric.id)
        ex = np.array(sorted(store.example_ids(s, ds.id).values()), dtype=np.int64)
        truth = {c.key: np.ones(ex.size, dtype=np.int64) for c in crits}
        pos = {int(e): i for i, e in enumerate(ex)}
        for e, key, value in s.execute(
            select(store.Label.example_id, store.Label.criterion, store.Label.value)
        ):
            if key in truth:
                truth[key][pos[e]] = value
        judge = store.get_or_create_judge(s, kind="simulated", name="bench-sim", model="judgekit-sim",
                                          base_url="http://127.0.0.1:9/v1")
        for k, kind in enumerate(["single", "split", "grouped", "single"]):
            harness = {"kind": kind, "order": "verdict_first",
                       "groups": [["answers_question", "cites_source"]] if kind == "grouped" else []}
            run = store.create_run(s, name=f"bench-{k}-{kind}", dataset=ds, rubric=rubric, judge=judge,
                                   harness=harness, example_ids=ex.tolist(), status="done")
            conn = s.connection()
            for c in crits:
                flip = rng.random(ex.size) < 0.10 + 0.05 * k
                values = np.where(flip, 1 - truth[c.key], truth[c.key])
                conn.execute(insert(store.Verdict.__table__), [
                    {"run_id": run.id, "example_id": int(e), "criterion_id": c.id, "value": int(v),
                     "rationale": "A short rationale.", "p_pass": None, "red_flags": [], "error": None,
                     "call_id": None}
                    for e, v in zip(ex, values, strict=True)
                ])
        s.flush()
    store.dispose_engines()


def warm(db_url: str) -> None:
    """Leave the matrix cache as judgekit does: filled for each run when it finishes and for the human
    column when labels are imported (a previous bench's cold render, or a cleared cache, empties it)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from judgekit import sources, store

    with Session(store.engine_for(db_url)) as s:
        for run in s.scalars(select(store.Run)):
            sources.warm_cache(s, run=run.id)
        for ds in s.scalars(select(store.Dataset.name)):
            sources.warm_cache(s, dataset=ds)
    store.dispose_engines()


def render(page: str, db_url: str, home: Path = ROOT) -> dict:
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url, "JUDGEKIT_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", RENDER, page, str(ROOT)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not line:
        raise RuntimeError(f"{page}: {proc.stderr[-2000:]}")
    return json.loads(line[-1])


def run(quick: bool = False, rebuild: bool = False) -> dict:
    n = 20_000 if quick else 100_000
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"pages_{n}.sqlite"
    if rebuild or not path.exists():
        t0 = time.perf_counter()
        build(path, n)
        print(f"built {path.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    url = f"sqlite:///{path}"
    # the matrix cache as judgekit leaves it (filled when runs finish and labels are imported) …
    warm(url)
    results = [render(p, url) for p in PAGES]
    # … and, for information, the heaviest page with an empty cache (a database written by another tool)
    with tempfile.TemporaryDirectory() as empty_home:
        cold = render("pages/associations.py", url, Path(empty_home))
    first = max(r["times"][0] for r in results)
    cached = max(max(r["times"][1:]) for r in results)
    peak = max(r["peak_mb"] for r in results)
    return {"examples": n, "runs": 4, "pages": results, "first_s": first, "cached_s": cached, "peak_mb": peak,
            "cold_associations_s": cold["times"][0], "errors": [e for r in results for e in r["errors"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k examples instead of 100k")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the bench database")
    args = parser.parse_args()
    r = run(quick=args.quick, rebuild=args.rebuild)
    print(f"{r['examples']} examples, {r['runs']} runs")
    for p in r["pages"]:
        t = p["times"]
        print(f"  {p['page']:<72} first {t[0]:6.2f} s   cached {t[1]:5.2f} s / {t[2]:5.2f} s   "
              f"peak {p['peak_mb']:6.0f} MB" + (f"   ERROR {p['errors'][0]}" if p["errors"] else ""))
    print(f"  (Associations with an empty matrix cache, e.g. runs written by another tool: "
          f"{r['cold_associations_s']:.2f} s)")
    holds = {k: r[k] <= v for k, v in TARGETS.items()}
    print(f"RESULT pages_first_s={r['first_s']:.2f} target=3.0 holds={str(holds['first_s']).lower()} "
          f"pages_cached_s={r['cached_s']:.2f} target=0.5 holds={str(holds['cached_s']).lower()} "
          f"peak_mb={r['peak_mb']:.0f} target=600 holds={str(holds['peak_mb']).lower()}")


if __name__ == "__main__":
    main()
