"""CLI start-up stays light: importing the CLI (or the package) loads none of the heavy libraries, and
every command is still registered. (Speed itself is measured in bench/startup_bench.py, not here.)"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sqlalchemy", "numpy", "scipy", "openai", "pandas", "plotly", "streamlit", "alembic", "yaml", "jinja2",
         "httpx", "rich", "pydantic", "orjson")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_judgekit_cli_loads_no_heavy_library():
    assert [m for m in loaded_after("import judgekit.cli") if m in HEAVY] == []


def test_help_of_every_command_loads_no_heavy_library():
    code = (
        "from judgekit.cli import app\n"
        "for args in (['--help'], ['run', '--help'], ['report', 'phi', '--help'], ['check', '--help'],"
        " ['critique', '--help'], ['label-set', 'create', '--help']):\n"
        "    try:\n        app(args)\n    except SystemExit:\n        pass\n"
    )
    # typer itself brings pydantic for a sub-command's parameters (not judgekit's doing)
    assert [m for m in loaded_after(code) if m in HEAVY and m != "pydantic"] == []


def test_the_dashboard_modules_load_no_http_client():
    """The pages' helpers read the store and draw; the openai client (and its HTTP stack) loads only when a
    judge call, a batch or an endpoint check is made."""
    loaded = loaded_after("import judgekit.ui, judgekit.ui_noise, judgekit.ui_bundles, judgekit.actions, "
                          "judgekit.jobs, judgekit.findings, judgekit.figures, judgekit.signin")
    assert [m for m in loaded if m in ("openai", "httpx", "httpx2")] == []


def test_import_judgekit_loads_nothing_else():
    assert [m for m in loaded_after("import judgekit") if m in HEAVY] == []


def test_every_command_is_registered(cli):
    result = cli("--help")
    assert result.exit_code == 0
    for name in ("init", "demo", "import-dataset", "import-rubric", "import-labels", "import-run", "export-labels",
                 "list", "run", "resume", "sim-judge", "local-judge", "app", "report", "export-report",
                 "label-set", "critique", "check"):
        assert f" {name} " in result.stdout or f" {name}\n" in result.stdout, name
    report = cli("report", "--help").stdout
    for name in ("crosstab", "phi", "compare", "agreement", "runs", "ko", "ab"):
        assert name in report


def test_critique_help_names_the_checks_critique_defines():
    from judgekit import cli_scale, critique

    assert tuple(critique.CHECKS) == cli_scale.CHECK_NAMES


def test_bundles_help_names_the_category_field_bundles_defines():
    from judgekit import bundles, cli_bundle

    assert cli_bundle.CATEGORY_FIELD == bundles.CATEGORY_FIELD


def test_every_cli_module_can_be_imported_first():
    """No import cycle inside the CLI: each sub-module imports only cli_common, so any may load first."""
    import pkgutil

    import judgekit

    names = [m.name for m in pkgutil.iter_modules(judgekit.__path__) if m.name.startswith("cli")]
    for name in names:
        subprocess.run([sys.executable, "-c", f"import judgekit.{name}"], check=True, timeout=120)
