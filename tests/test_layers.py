"""Imports point down: every fightlab import (module level and inside functions, read with ast)
goes to the same or a lower layer of DESIGN.md's `layers` block, and no two modules import each
other in a cycle. Notebooks, bench scripts and tests use no `_private` fightlab name."""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fightlab"


def layers(block: str = "layers") -> list[tuple[str, list[str]]]:
    """DESIGN.md's ```layers (or ```wings) block: one line per layer, bottom first,
    `name: prefix prefix …`."""
    text = (ROOT / "DESIGN.md").read_text()
    m = re.search(rf"```{block}\n(.*?)```", text, re.S)
    assert m, f"DESIGN.md has no ```{block} block"
    out = []
    for line in m.group(1).strip().splitlines():
        name, _, mods = line.partition(":")
        out.append((name.strip(), mods.split()))
    return out


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(mod: str, table) -> int | None:
    """Index of the layer whose longest prefix matches `mod` (a prefix matches itself and its
    submodules); None when no layer names it."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(table):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def fightlab_imports(path: Path) -> list[tuple[str, int]]:
    """(imported fightlab module, line) for every import in the file, at any depth. `from X
    import y` counts as X.y when X.y is a module of the package, else as X."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "fightlab"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                pkg = me.split(".")[: len(me.split(".")) - node.level + (path.name == "__init__.py")]
                base = ".".join(pkg + ([base] if base else []))
            if base.split(".")[0] != "fightlab":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                is_mod = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or \
                    (ROOT / Path(*sub.split(".")) / "__init__.py").exists()
                out.append((sub if is_mod else base, node.lineno))
    return out


MODULES = sorted(p for p in PKG.rglob("*.py"))


def test_every_module_has_a_layer():
    table = layers()
    missing = [module_name(p) for p in MODULES if layer_of(module_name(p), table) is None]
    assert not missing, f"modules in no layer of DESIGN.md: {missing}"


def test_imports_point_down():
    table = layers()
    bad = []
    for p in MODULES:
        me = module_name(p)
        mine = layer_of(me, table)
        for target, line in fightlab_imports(p):
            if target == "fightlab" and me == "fightlab":
                continue
            theirs = layer_of(target, table)
            if theirs is None or theirs > mine:
                bad.append(f"{p.relative_to(ROOT)}:{line}: {me} ({table[mine][0]}) imports {target} "
                           f"({'no layer' if theirs is None else table[theirs][0]})")
    assert not bad, "imports pointing up:\n" + "\n".join(bad)


def test_every_module_has_a_wing():
    table = layers("wings")
    missing = [module_name(p) for p in MODULES if layer_of(module_name(p), table) is None]
    assert not missing, f"modules in no wing of DESIGN.md: {missing}"


def test_the_core_imports_nothing_of_the_lab_or_operations():
    """The wings block, bottom first: core, lab, operations, wiring; a module imports its own wing
    and those below (the core only the core)."""
    table = layers("wings")
    assert [name for name, _ in table] == ["core", "lab", "ops", "wiring"]
    bad = []
    for p in MODULES:
        me = module_name(p)
        mine = layer_of(me, table)
        for target, line in fightlab_imports(p):
            theirs = layer_of(target, table)
            if target != "fightlab" and (theirs is None or theirs > mine):
                bad.append(f"{p.relative_to(ROOT)}:{line}: {me} ({table[mine][0]}) imports {target} "
                           f"({'no wing' if theirs is None else table[theirs][0]})")
    assert not bad, "imports across the wings:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = {module_name(p): {t for t, _ in fightlab_imports(p)} for p in MODULES}
    # a package's __init__ is imported with any of its submodules: edges to "fightlab" itself
    # (the lazy public API) are not module dependencies
    for k in graph:
        graph[k] = {t for t in graph[k] if t in graph and t != k and t != "fightlab"}
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for t in sorted(graph[n]):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif not state.get(t):
                visit(t)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _private_uses(source: str) -> list[str]:
    """`_private` names taken from fightlab in `source` (imports and attribute uses of an
    imported fightlab module)."""
    tree = ast.parse(source)
    found, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fightlab"):
            for a in node.names:
                if a.name.startswith("_") or any(s.startswith("_") and s != "__main__"
                                                 for s in (node.module or "").split(".")):
                    found.append(f"from {node.module} import {a.name}")
                else:
                    aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("fightlab"):
                    if any(s.startswith("_") for s in a.name.split(".")):
                        found.append(f"import {a.name}")
                    aliases.add(a.asname or a.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            v = node.value
            while isinstance(v, ast.Attribute):
                v = v.value
            if isinstance(v, ast.Name) and v.id in aliases:
                found.append(f"{ast.unparse(node)}")
    return found


def _sources():
    for p in sorted((ROOT / "tests").glob("*.py")) + sorted((ROOT / "bench").glob("*.py")):
        yield p.relative_to(ROOT), p.read_text()
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(p.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        code = "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!")))
        yield p.relative_to(ROOT), code


@pytest.mark.parametrize("name, source", list(_sources()), ids=lambda x: str(x)[:40])
def test_no_private_fightlab_names_outside_the_package(name, source):
    if name == Path("tests/test_layers.py"):
        return  # this file names private names in its own examples
    bad = _private_uses(source)
    assert not bad, f"{name} uses private fightlab names: {sorted(set(bad))}"


def test_the_private_name_check_can_fail():
    assert _private_uses("from fightlab.cli import _default_device") == \
        ["from fightlab.cli import _default_device"]
    assert _private_uses("from fightlab.kernels import factor as F\nF._put(1)") == ["F._put"]
    assert _private_uses("import fightlab._hidden") == ["import fightlab._hidden"]
    assert _private_uses("from fightlab.kernels import factor\nfactor.run(1)") == []


def test_the_layer_check_can_fail(tmp_path):
    table = [("low", ["fightlab.a"]), ("high", ["fightlab.b"])]
    assert layer_of("fightlab.a.x", table) == 0 and layer_of("fightlab.b", table) == 1
    assert layer_of("fightlab.c", table) is None


#: the learner's modules (all of rl/): they see a task only through the door (`fightlab.envs.vecenv`)
LEARNER = sorted(p.stem for p in (PKG / "rl").glob("*.py"))


@pytest.mark.parametrize("name", LEARNER)
def test_the_learner_imports_no_task_module(name):
    path = PKG / "rl" / f"{name}.py"
    bad = [m for m, _ in fightlab_imports(path)
           if (m.startswith("fightlab.envs") or m == "fightlab.run" or m.startswith("fightlab.run.")) and m != "fightlab.envs.vecenv"]
    assert not bad, f"fightlab/rl/{name}.py imports task or run modules {bad}: only the door, fightlab.envs.vecenv"


def test_the_curriculum_lives_with_the_task():
    assert not (PKG / "rl" / "curriculum.py").exists() and (PKG / "envs" / "curriculum.py").exists()
