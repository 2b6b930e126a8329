"""A team server under load: concurrent real-Chromium sessions on one `judgekit app --auth token` server
over PostgreSQL — half labeling, half browsing the analysis pages — beside the same actions by one user.

Set-up: a PostgreSQL server started as the tests start theirs (``tests/pg.py``), the demo workspace with
a `single` and a `split` run of the simulated judge over every answer, one label set shared by every
labeler, and a team file with one token per session (labelers are annotators, browsers are viewers).

1. **Single user.** One labeler saves ``single_saves`` items alone; then one browser renders
   ``single_renders`` analysis pages alone.
2. **Load.** All sessions sign in; then for ``seconds`` each labeler labels item after item (six
   pass/fail clicks, "Save & next") and each browser cycles Cross-tabs → Associations → Compare →
   Agreement → Workspace.

A label save is timed from the click on "Save & next" until the next item is on screen; a page render
from the click on its link until its title shows and the script run has finished — what the person
waits for, in the browser. Every save the page confirmed is recorded with its values, and at the end
the labels table must hold exactly those rows for each labeler: none lost, none extra, none different.
The server's resident memory is sampled every 0.25 s; its peak (VmHWM) is reported.

Chromium's renderers share this machine's cores with the server, so the figures are those of a
deliberately crowded box. Run: ``python bench/team_load_bench.py [--quick] [--labelers N --browsers N
--seconds S]``; `make bench` runs it as the `team` row of bench/run_all.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judgekit import auth, labeling, store  # noqa: E402
from tests.browser import CHROMIUM, CHROMIUM_ARGS, SERVERS, judgekit_app  # noqa: E402

BROWSE = ["Cross-tabs", "Associations", "Compare", "Agreement", "Workspace"]
SIZES = {
    False: {"examples": 600, "set_size": 600, "labelers": 5, "browsers": 5, "seconds": 180,
            "single_saves": 15, "single_renders": 15},
    True: {"examples": 30, "set_size": 30, "labelers": 2, "browsers": 2, "seconds": 5,
           "single_saves": 1, "single_renders": 2},
}
TIMEOUT_MS = 180_000  # one action on a crowded box; a save slower than this is counted as unconfirmed
NOT_RUNNING = '[data-testid="stApp"][data-test-script-state="notRunning"]'


@dataclass
class Session:
    name: str
    token: str
    saves: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # (example ext_id, values)
    save_s: list[float] = field(default_factory=list)
    render_s: list[float] = field(default_factory=list)
    unconfirmed: int = 0
    errors: list[str] = field(default_factory=list)


class MemorySampler(threading.Thread):
    """Resident memory of one process (MB) every 0.25 s, until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.samples, self.stopped = pid, [], threading.Event()

    def field_mb(self, name: str) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) / 1024
        return float("nan")

    def run(self) -> None:
        while not self.stopped.wait(0.25):
            try:
                self.samples.append((time.monotonic(), self.field_mb("VmRSS")))
            except OSError:
                return

    def now_mb(self) -> float:
        return self.field_mb("VmRSS")

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------- set-up


def build(db_url: str, n_examples: int, set_size: int, team_file: Path, labelers: int, browsers: int
          ) -> tuple[list[Session], list[Session], list[str]]:
    """The demo, two simulated runs, a label set, and a team file; returns labelers, browsers, criteria."""
    from sqlalchemy.orm import Session as DbSession

    from tests.conftest import load_demo, simulated_runs

    engine = store.engine_for(db_url)
    simulated_runs(load_demo(engine, n_examples), db_url)
    with DbSession(engine) as s, s.begin():
        info = labeling.create_label_set(s, "load", dataset="demo", rubric="demo",
                                         spec=labeling.SampleSpec("random", size=set_size, seed=7))
    keys = [c.key for c in info.criteria]
    lab = [Session(f"labeler{i + 1}", auth.add_member(team_file, f"labeler{i + 1}", "annotator") or "")
           for i in range(labelers)]
    brw = [Session(f"browser{i + 1}", auth.add_member(team_file, f"browser{i + 1}", "viewer") or "")
           for i in range(browsers)]
    store.dispose_engines()
    return lab, brw, keys


# --------------------------------------------------------------------------------------------- sessions


async def sign_in(page, base: str, who: Session) -> None:
    from playwright.async_api import expect

    await page.goto(base, timeout=TIMEOUT_MS)
    await page.get_by_label("Access token", exact=True).fill(who.token, timeout=TIMEOUT_MS)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_text(f"Signed in as {who.name}")).to_be_visible(timeout=TIMEOUT_MS)


async def settled(page) -> None:
    await page.wait_for_selector(NOT_RUNNING, state="attached", timeout=TIMEOUT_MS)


async def open_page(page, title: str) -> float:
    """Click a page's link; seconds until its title shows and its script run has finished."""
    from playwright.async_api import expect

    t0 = time.perf_counter()
    await page.locator('[data-testid="stSidebarNav"] a', has_text=title).click()
    await expect(page.get_by_role("heading", name=title, exact=True).first).to_be_visible(timeout=TIMEOUT_MS)
    await settled(page)
    return time.perf_counter() - t0


def plan(name: str, ext_id: str, keys: list[str]) -> dict[str, int]:
    """A labeler's values for an item: deterministic, different per labeler and item."""
    rng = np.random.default_rng(zlib.crc32(f"{name}|{ext_id}".encode()))
    return {k: int(v) for k, v in zip(keys, rng.integers(0, 2, len(keys)), strict=True)}


async def label_items(page, who: Session, keys: list[str], keep_going: Callable[[], bool]) -> None:
    """Label item after item while ``keep_going()``; each confirmed save is recorded with its values."""
    from playwright.async_api import expect

    progress = page.get_by_text(re.compile(r"^(Item \d+ of \d+|All \d+ items seen)"))
    while keep_going():
        await expect(progress).to_be_visible(timeout=TIMEOUT_MS)
        shown = await progress.inner_text()
        if shown.startswith("All"):  # the end of the label set
            return
        pos, n = map(int, re.match(r"Item (\d+) of (\d+)", shown).groups())
        ext_id = (await page.get_by_text(re.compile(r"^Example \S+")).first.inner_text()).split()[1]
        values = plan(who.name, ext_id, keys)
        for i, key in enumerate(keys):
            text = "Pass" if values[key] else "Fail"
            buttons = page.locator('button[data-testid^="stBaseButton"]', has_text=text).filter(visible=True)
            await buttons.nth(i).click(timeout=TIMEOUT_MS)
            await expect(page.get_by_text(f"{i + 1} of {len(keys)} criteria chosen", exact=True)).to_be_visible(
                timeout=TIMEOUT_MS)
        await settled(page)
        t0 = time.perf_counter()
        await page.get_by_role("button", name=re.compile(r"^Save & next")).click()
        try:
            after = f"Item {pos + 1} of {n}" if pos < n else f"All {n} items seen"
            await expect(page.get_by_text(after)).to_be_visible(timeout=TIMEOUT_MS)
        except AssertionError:
            who.unconfirmed += 1
            return
        who.save_s.append(time.perf_counter() - t0)
        who.saves.append((ext_id, values))
        await settled(page)


async def browse(page, who: Session, keep_going: Callable[[], bool], limit: int | None = None) -> None:
    k = 0
    while keep_going() and (limit is None or k < limit):
        who.render_s.append(await open_page(page, BROWSE[k % len(BROWSE)]))
        k += 1


async def drive(base: str, labelers: list[Session], browsers: list[Session], keys: list[str], sizes: dict,
                memory: MemorySampler) -> dict:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pages = {}
        for who in [*labelers, *browsers]:
            context = await browser.new_context(viewport={"width": 1400, "height": 1000})
            pages[who.name] = await context.new_page()
            pages[who.name].set_default_timeout(TIMEOUT_MS)

        # 1. one user at a time: a labeler, then a browser (server CPU counted from the first save)
        single_lab, single_brw = Session(labelers[0].name, labelers[0].token), Session(browsers[0].name,
                                                                                      browsers[0].token)
        page = pages[labelers[0].name]
        await sign_in(page, base, labelers[0])
        await open_page(page, "Label")
        cpu0 = memory.cpu_s()
        await label_items(page, single_lab, keys, lambda: len(single_lab.saves) < sizes["single_saves"])
        cpu_single_labeling = memory.cpu_s() - cpu0
        page = pages[browsers[0].name]
        await sign_in(page, base, browsers[0])
        cpu0 = memory.cpu_s()
        await browse(page, single_brw, lambda: True, limit=sizes["single_renders"])
        cpu_single_browsing = memory.cpu_s() - cpu0
        rss_after_single = memory.now_mb()

        # 2. everyone at once (the single user's saves count too: their labels must be stored once)
        labelers[0].saves, labelers[0].save_s = list(single_lab.saves), []
        await asyncio.gather(*(sign_in(pages[w.name], base, w) for w in [*labelers[1:], *browsers[1:]]))
        await asyncio.gather(*(open_page(pages[w.name], "Label") for w in labelers[1:]))
        deadline = time.monotonic() + sizes["seconds"]
        t_load, cpu0 = time.monotonic(), memory.cpu_s()

        def keep_going() -> bool:
            return time.monotonic() < deadline

        async def guarded(coro, who: Session) -> None:
            try:
                await coro
            except Exception as exc:  # a session that broke is reported, not hidden
                who.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")

        await asyncio.gather(*(guarded(label_items(pages[w.name], w, keys, keep_going), w) for w in labelers),
                             *(guarded(browse(pages[w.name], w, keep_going), w) for w in browsers))
        load_s, cpu_load = time.monotonic() - t_load, memory.cpu_s() - cpu0
        await browser.close()
    return {"single_lab": single_lab, "single_brw": single_brw, "rss_after_single": rss_after_single,
            "load_s": load_s, "t_load": t_load, "cpu_single_labeling_s": cpu_single_labeling,
            "cpu_single_browsing_s": cpu_single_browsing, "cpu_load_s": cpu_load}


# --------------------------------------------------------------------------------------------- checks


def check_labels(db_url: str, labelers: list[Session]) -> dict:
    """Compare the labels table with the saves each page confirmed: lost, extra, different."""
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session as DbSession

    engine = store.engine_for(db_url)
    with DbSession(engine) as s:
        rows = s.execute(
            select(store.Annotator.name, store.Example.ext_id, store.Label.criterion, store.Label.value)
            .join(store.Annotator, store.Annotator.id == store.Label.annotator_id)
            .join(store.Example, store.Example.id == store.Label.example_id)
            .where(store.Annotator.name != labeling.REFERENCE_ANNOTATOR)).all()
        per_key = s.execute(select(func.count()).select_from(store.Label).group_by(
            store.Label.example_id, store.Label.criterion, store.Label.annotator_id).having(func.count() > 1)).all()
    stored = {(a, e, c): v for a, e, c, v in rows}
    expected = {(w.name, e, c): v for w in labelers for e, values in w.saves for c, v in values.items()}
    lost = [k for k in expected if k not in stored]
    extra = [k for k in stored if k not in expected]
    different = [k for k in expected if k in stored and stored[k] != expected[k]]
    store.dispose_engines()
    return {"labels_expected": len(expected), "labels_stored": len(rows), "lost": len(lost),
            "extra": len(extra), "different": len(different), "duplicated_keys": len(per_key),
            "saves": sum(len(w.saves) for w in labelers)}


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


# --------------------------------------------------------------------------------------------- run


def run(quick: bool = False, labelers: int | None = None, browsers: int | None = None,
        seconds: float | None = None) -> dict:
    from tests.pg import PostgresServer

    sizes = dict(SIZES[quick])
    sizes.update({k: v for k, v in (("labelers", labelers), ("browsers", browsers), ("seconds", seconds)) if v})
    load_before = os.getloadavg()[0]
    pg = PostgresServer().start()
    work = Path(tempfile.mkdtemp(prefix="judgekit-team-bench-"))
    try:
        db_url = pg.new_database()
        team_file = work / "team.toml"
        lab, brw, keys = build(db_url, sizes["examples"], sizes["set_size"], team_file, sizes["labelers"],
                               sizes["browsers"])
        env = {"JUDGEKIT_TEAM_FILE": str(team_file), "JUDGEKIT_HOME": str(work)}
        with judgekit_app(db_url, work / "server.log", "--auth", "token", extra_env=env) as base:
            memory = MemorySampler(SERVERS[base].pid)
            rss_start = memory.now_mb()
            memory.start()
            out = asyncio.run(drive(base, lab, brw, keys, sizes, memory))
            memory.stopped.set()
            rss_peak = memory.field_mb("VmHWM")
            rss_end = memory.now_mb()
        t_load = out["t_load"]
        during = [mb for t, mb in memory.samples if t >= t_load]
        third = [mb for t, mb in memory.samples if t_load <= t < t_load + out["load_s"] / 3]
        labels = check_labels(db_url, lab)
    finally:
        store.dispose_engines()
        pg.stop()
    saves = [x for w in lab for x in w.save_s]
    renders = [x for w in brw for x in w.render_s]
    return {
        **sizes, "sessions": len(lab) + len(brw), "load_s": out["load_s"], **labels,
        "unconfirmed": sum(w.unconfirmed for w in lab),
        "errors": [f"{w.name}: {e}" for w in [*lab, *brw] for e in w.errors],
        "single_save_p50": pct(out["single_lab"].save_s, 50), "single_save_p95": pct(out["single_lab"].save_s, 95),
        "single_render_p50": pct(out["single_brw"].render_s, 50),
        "single_render_p95": pct(out["single_brw"].render_s, 95),
        "single_saves_done": len(out["single_lab"].save_s), "single_renders_done": len(out["single_brw"].render_s),
        "load_saves": len(saves), "load_renders": len(renders),
        "save_p50": pct(saves, 50), "save_p95": pct(saves, 95),
        "render_p50": pct(renders, 50), "render_p95": pct(renders, 95),
        "rss_start_mb": rss_start, "rss_after_single_mb": out["rss_after_single"],
        "rss_first_third_max_mb": max(third, default=float("nan")),
        "rss_load_max_mb": max(during, default=float("nan")),
        "rss_end_mb": rss_end, "rss_peak_mb": rss_peak,
        "server_cpu_per_single_item_s": out["cpu_single_labeling_s"] / max(len(out["single_lab"].saves), 1),
        "server_cpu_per_single_render_s": out["cpu_single_browsing_s"] / max(len(out["single_brw"].render_s), 1),
        "server_cpu_load_s": out["cpu_load_s"],
        "loadavg_before": load_before, "loadavg_after": os.getloadavg()[0], "cores": os.cpu_count(),
    }


def report(r: dict) -> None:
    print(f"{r['sessions']} sessions ({r['labelers']} labeling, {r['browsers']} browsing) for {r['load_s']:.0f} s on "
          f"PostgreSQL; demo {r['examples']} answers, 2 runs; machine load average {r['loadavg_before']:.1f} "
          f"before, {r['loadavg_after']:.1f} after, {r['cores']} cores")
    print(f"  label save   single user p50 {r['single_save_p50']:5.2f} s  p95 {r['single_save_p95']:5.2f} s   "
          f"| {r['sessions']} sessions p50 {r['save_p50']:5.2f} s  p95 {r['save_p95']:5.2f} s  "
          f"({r['load_saves']} saves)")
    print(f"  page render  single user p50 {r['single_render_p50']:5.2f} s  p95 {r['single_render_p95']:5.2f} s   "
          f"| {r['sessions']} sessions p50 {r['render_p50']:5.2f} s  p95 {r['render_p95']:5.2f} s  "
          f"({r['load_renders']} renders)")
    print(f"  server CPU: {r['server_cpu_per_single_item_s']:.2f} s per labeled item (6 clicks + save) and "
          f"{r['server_cpu_per_single_render_s']:.2f} s per page render for the single user; "
          f"{r['server_cpu_load_s']:.0f} s over the {r['load_s']:.0f} s of load "
          f"({100 * r['server_cpu_load_s'] / max(r['load_s'], 1e-9):.0f} % of one core)")
    print(f"  labels: {r['saves']} confirmed saves → {r['labels_expected']} labels expected, {r['labels_stored']} "
          f"stored; lost {r['lost']}, extra {r['extra']}, different {r['different']}, keys stored twice "
          f"{r['duplicated_keys']}; unconfirmed saves {r['unconfirmed']}")
    print(f"  server RSS: start {r['rss_start_mb']:.0f} MB, after single user {r['rss_after_single_mb']:.0f} MB, "
          f"max in the first third of the load {r['rss_first_third_max_mb']:.0f} MB, max under load "
          f"{r['rss_load_max_mb']:.0f} MB, end {r['rss_end_mb']:.0f} MB, peak (VmHWM) {r['rss_peak_mb']:.0f} MB")
    for e in r["errors"]:
        print(f"  ERROR {e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 + 2 sessions for 5 s over 30 answers")
    parser.add_argument("--labelers", type=int)
    parser.add_argument("--browsers", type=int)
    parser.add_argument("--seconds", type=float)
    args = parser.parse_args()
    r = run(quick=args.quick, labelers=args.labelers, browsers=args.browsers, seconds=args.seconds)
    report(r)
    bad = r["lost"] + r["extra"] + r["different"] + r["duplicated_keys"]
    print(f"RESULT team_labels_wrong={bad} team_save_p95_s={r['save_p95']:.2f} "
          f"single_save_p95_s={r['single_save_p95']:.2f} team_render_p95_s={r['render_p95']:.2f} "
          f"single_render_p95_s={r['single_render_p95']:.2f} server_peak_rss_mb={r['rss_peak_mb']:.0f}")


if __name__ == "__main__":
    main()
