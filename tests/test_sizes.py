"""Sizes: no module of fightlab over 600 lines; no function over 60 lines in the training core
(bodies, sim, kernels, envs, rl, run, config) and none over 100 elsewhere. A function's length
is its whole definition, decorators and signature included (a kernel's argument list counts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fightlab"
MODULE_MAX = 600
CORE = ("bodies", "sim", "kernels", "envs", "rl", "run", "config")
CORE_FUNCTION_MAX, FUNCTION_MAX = 60, 100
MODULES = sorted(PKG.rglob("*.py"))


def _functions(path: Path):
    """(name, first line, lines) of every function and method in the file, nested ones too."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield node.name, first, node.end_lineno - first + 1


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_module_and_function_sizes(path):
    rel = path.relative_to(PKG)
    n = len(path.read_text().splitlines())
    assert n <= MODULE_MAX, f"fightlab/{rel} has {n} lines; at most {MODULE_MAX}"
    limit = CORE_FUNCTION_MAX if rel.parts[0] in CORE else FUNCTION_MAX
    long = [f"{name} (line {line}: {size} lines)" for name, line, size in _functions(path) if size > limit]
    assert not long, f"fightlab/{rel}: functions over {limit} lines: {', '.join(long)}"


def test_the_size_check_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    f = tmp_path / "long.py"
    f.write_text(f"@decorator\ndef long():\n{body}\n")
    assert [(n, size) for n, _, size in _functions(f)] == [("long", 72)]
