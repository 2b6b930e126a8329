"""The package's shape holds: every module imports only from its own layer or those below
(import-linter's contract in pyproject.toml), and no module — nor a page — uses another module's
``_private`` names (a public function is the seam)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


def test_every_module_has_a_layer():
    """A module left out of the contract would be checked by nothing."""
    import pkgutil
    import tomllib

    import judgekit

    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    listed = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    modules = {f"judgekit.{m.name}" for m in pkgutil.iter_modules(judgekit.__path__)}
    assert sorted(modules - listed) == [] and sorted(listed - modules) == []


def test_the_contract_ignores_no_crossing():
    """Every layer crossing is gone: the contract holds without exceptions (an ignored import is a crossing)."""
    import tomllib

    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    assert contract.get("ignore_imports", []) == []


def private_uses(path: Path) -> list[str]:
    """``module._name`` and ``from judgekit.module import _name`` where module is another judgekit module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("judgekit"):
            for a in node.names:
                if node.module == "judgekit":
                    aliases.add(a.asname or a.name)
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{path.name}:{node.lineno} from {node.module} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("judgekit.") and a.asname:
                    aliases.add(a.asname)
    own = path.stem
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.value.id != own and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    files = [*sorted((ROOT / "judgekit").glob("*.py")), *sorted((ROOT / "pages").glob("*.py")), ROOT / "app.py"]
    assert [use for f in files for use in private_uses(f)] == []
