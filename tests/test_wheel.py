"""The wheel works on its own: built from this checkout, installed into a fresh virtual environment, and
used from a folder outside the repository — `judgekit init` (the migrations travel in the wheel), `judgekit
demo`, a run against the simulated judge, a report, and `judgekit app` (app.py and pages/ travel too).

Slow (a real `pip install` of the wheel and its dependencies, pinned to this environment's versions so pip
takes them from its cache), and part of `make test`: an install that only works from a checkout is a bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.browser import free_port, serving

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(cmd: list, cwd: Path, env: dict, timeout: float = 600) -> str:
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel and what it declares; returns its bin/ folder."""
    build = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEKIT_", "PYTHONPATH", "VIRTUAL_ENV"))}
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", build / "dist", ROOT], build, env)
    (wheel,) = (build / "dist").glob("judgekit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "judgekit/resources/app.py" in names and "judgekit/resources/pages/run.py" in names
    assert any(n.startswith("judgekit/resources/db/migrations/versions/0001_") for n in names)
    # the same versions as this environment: pip then installs from its cache, and a failure is the wheel's
    frozen = run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], build, env)
    (build / "constraints.txt").write_text(
        "\n".join(line for line in frozen.splitlines() if not line.lower().startswith(("judgekit", "-e "))))
    venv = build / "venv"
    run([sys.executable, "-m", "venv", venv], build, env)
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", "-c", build / "constraints.txt", wheel], build, env)
    return venv / "bin"


@pytest.fixture
def outside(tmp_path, installed) -> tuple[Path, dict]:
    """A working folder outside the repository and an environment whose PATH starts at the fresh venv."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    assert ROOT not in folder.parents
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGEKIT_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env["PATH"] = f"{installed}{os.pathsep}{env['PATH']}"
    return folder, env


def test_the_installed_package_is_the_wheel_not_the_checkout(outside, installed):
    folder, env = outside
    where = run([installed / "python", "-c", "import judgekit.config as c; print(c.PACKAGE_DIR, c.APP_FILE)"],
                folder, env).split()
    assert Path(where[0]).is_relative_to(installed.parent) and Path(where[1]).is_file()


def test_init_demo_run_report_from_outside_the_repository(outside, installed):
    folder, env = outside
    assert "at revision" in run(["judgekit", "init"], folder, env)
    assert (folder / "db" / "judgekit.sqlite").is_file()  # the workspace is the current folder
    run(["judgekit", "demo", "--examples", "60"], folder, env)
    port = free_port()
    with (folder / "sim.log").open("w") as log:
        sim = subprocess.Popen(["judgekit", "sim-judge", "--port", str(port)], cwd=folder, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120  # start-up on a crowded machine, not a performance bound
        while True:
            assert sim.poll() is None, (folder / "sim.log").read_text()
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, (folder / "sim.log").read_text()
                time.sleep(0.2)
        run(["judgekit", "run", "--dataset", "demo", "--rubric", "demo", "--base-url", f"http://127.0.0.1:{port}/v1",
             "--model", "judgekit-sim", "--sample", "20", "--seed", "1", "--name", "wheel"], folder, env)
    finally:
        sim.terminate()
        sim.wait(10)
    table = json.loads(run(["judgekit", "report", "crosstab", "--run", "wheel", "--row", "cites_source",
                            "--col", "answers_question", "--format", "json"], folder, env))
    assert table["source"] == "run:wheel" and table["n"] == 20, table
    assert sum(n for row in table["counts"].values() for n in row.values()) == 20


def test_app_serves_its_pages_from_the_wheel(outside, installed, tmp_path):
    folder, env = outside
    run(["judgekit", "init"], folder, env)
    # the router and its default page, run from the wheel's own copy of app.py
    # `judgekit app` passes the address on its command line; the bare AppTest is told it (as conftest does)
    probe = ("from streamlit import config as st_config; st_config.set_option('server.address', '127.0.0.1')\n"
             "from streamlit.testing.v1 import AppTest; from judgekit import config\n"
             "at = AppTest.from_file(str(config.APP_FILE), default_timeout=120).run()\n"
             "assert not at.exception, [e.message for e in at.exception]\n"
             "print(at.title[0].value if at.title else '')")
    assert run([installed / "python", "-c", probe], folder, env).strip() == "Workspace"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (serving(["judgekit", "app", "--port", str(port)], env, tmp_path / "app.log", base, cwd=folder),
          urllib.request.urlopen(f"{base}/_stcore/health", timeout=10) as resp):
        assert resp.status == 200 and resp.read().strip() == b"ok"
