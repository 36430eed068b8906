"""The suite runs as plain ``pytest`` from the root, not only as ``python -m pytest``.

``tests/`` is not a package: pytest puts it on ``sys.path`` (rootdir conftest), so helpers are
imported by their own name (``from cli_support import ...``). ``from tests.x import ...``
works only when the current directory is on ``sys.path`` (``python -m pytest``), and plain
``pytest`` failed at collection."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_test_module_imports_the_tests_folder_as_a_package() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(TESTS)}:{node.lineno}" for n in names
                          if n == "tests" or n.startswith("tests.")]
    assert offenders == [], "import helpers by their own name: " + ", ".join(offenders)
