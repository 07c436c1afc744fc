"""The pipeline is the layout: imports point one way, and syntax/ knows no later stage."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "struckdown"
#: What syntax/ may import from struckdown: itself and the error classes.
SYNTAX_MAY_IMPORT = {"struckdown.errors"}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path], *, annotations: bool = True) -> set[str]:
    """Every struckdown module `name` imports, at any depth of its body; with
    `annotations=False`, not those under `if TYPE_CHECKING:` (never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if annotations else {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


@functools.cache  # every struckdown file parsed once for the three tests (they only read it)
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_no_import_cycle_in_struckdown() -> None:
    """Not even through imports made for type annotations only."""
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_syntax_imports_nothing_from_a_later_stage() -> None:
    graph = _graph()
    leaks = {
        module: sorted(t for t in targets if not t.startswith("struckdown.syntax") and t not in SYNTAX_MAY_IMPORT)
        for module, targets in graph.items()
        if module.startswith("struckdown.syntax")
    }
    assert {m: t for m, t in leaks.items() if t} == {}


def test_the_walker_sees_imports_inside_functions() -> None:
    """The graph is real: a lazy import inside a function counts as an arrow."""
    graph = _graph()
    assert "struckdown.check" in graph["struckdown.environment"]  # imported inside Environment._build
    assert "struckdown.run.caches" in graph["struckdown.environment"]
