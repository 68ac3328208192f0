"""Imports go one way: tools → planes → contract.

``onceover`` is the contract both planes import; ``onceover_jobs`` (the data plane) and
``onceover_backend`` (the control plane) never import each other or the tools
(``onceover_tools``); the contract imports none of them. Read from the source, every
import statement, lazy ones inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "onceover": ROOT / "onceover",
    "onceover_jobs": ROOT / "jobs" / "onceover_jobs",
    "onceover_backend": ROOT / "backend" / "onceover_backend",
    "onceover_tools": ROOT / "tools" / "onceover_tools",
    "pyspark_onceover": ROOT / "pyspark_onceover",
}
MAY_IMPORT = {
    "onceover": {"onceover"},
    "onceover_jobs": {"onceover", "onceover_jobs"},
    "onceover_backend": {"onceover", "onceover_backend"},
    "pyspark_onceover": {"onceover", "onceover_jobs"},
    "onceover_tools": set(PACKAGES),
}


def imported_packages(path: Path) -> set[tuple[int, str]]:
    """(line, top-level name) of every absolute import in ``path`` of one of ours."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in PACKAGES}
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_imports_only_what_stands_below_it(package: str) -> None:
    crossing = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted(PACKAGES[package].rglob("*.py"))
        for line, name in sorted(imported_packages(path))
        if name not in MAY_IMPORT[package]
    ]
    assert not crossing, "\n".join(crossing)


def test_the_rule_sees_a_crossing(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from onceover_tools.cli import main\n")
    assert imported_packages(planted) == {(2, "onceover_tools")}
