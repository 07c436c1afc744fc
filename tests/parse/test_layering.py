"""The pipeline is the layout: imports point one way, and syntax/ knows no later stage."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "struckdown"
#: What syntax/ may import from struckdown: itself, the error classes and the version.
SYNTAX_MAY_IMPORT = {"struckdown.errors", "struckdown._version"}


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


FRONT_ENDS = ("struckdown.cli", "struckdown.web", "struckdown.editor")
#: The CLI's launchers of the other front ends (`sd serve`, `sd edit`: web/; `sd lsp`:
#: editor/), and `sd preview`, which highlights with the editor's Pygments lexer (the
#: lexer is registered under that path as a `pygments.lexers` entry point).
MAY_CROSS = {
    ("struckdown.cli.web_cmd", "struckdown.web"),
    ("struckdown.cli.lsp_cmd", "struckdown.editor"),
    ("struckdown.cli.preview", "struckdown.editor"),
}


def _front_end(module: str) -> str | None:
    return next((f for f in FRONT_ENDS if module == f or module.startswith(f + ".")), None)


def test_front_ends_use_the_library_and_never_one_another() -> None:
    """web/ and editor/ import no cli/ and not each other; cli/ imports them only where
    MAY_CROSS says. What they share (lint, explain, batch tables, the journal, tools files)
    is the library's."""
    graph = _graph()
    crossings = {
        module: sorted(
            t for t in targets
            if _front_end(t) not in (None, _front_end(module)) and (module, _front_end(t)) not in MAY_CROSS
        )
        for module, targets in graph.items()
        if _front_end(module) is not None
    }
    assert {m: t for m, t in crossings.items() if t} == {}


def test_the_library_imports_no_front_end() -> None:
    graph = _graph()
    leaks = {
        module: sorted(t for t in targets if _front_end(t) is not None)
        for module, targets in graph.items()
        if _front_end(module) is None
    }
    assert {m: t for m, t in leaks.items() if t} == {}


def test_the_front_end_rule_sees_a_crossing() -> None:
    """The rule can fail: the launcher `sd serve` imports web/, and it is the exception."""
    graph = _graph()
    assert any(_front_end(t) == "struckdown.web" for t in graph["struckdown.cli.web_cmd"])
    assert _front_end("struckdown.cli.check") == "struckdown.cli" and _front_end("struckdown.lint") is None


# -- between folders: the same walk lifted to folders (struckdown.run.slot -> "run") ------------

#: The library's layers, bottom first: a folder or top-level module imports only from its own
#: layer and the ones below (docs/architecture.md). "struckdown" is the package's __init__.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer.split()) for layer in (
    "_version codec results wording errors log notices fileio feed lru sync media render cache limits incremental observe heap labels",
    "syntax",
    "types actions slot_options",
    "models compat authority",
    "env_view check plan variables",
    "tools approval run_options flow",
    "run",
    "batch",
    "environment",
    "api lint eval explain distributed service",
    "struckdown state_signing cache_report",
    "cli web editor",
))
#: Arrows that may run back up a layer (the issue's ceiling; today none does).
MAX_ARROWS_UP = 3


def _folder(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _folder_graph() -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        edges = folders.setdefault(_folder(module), set())
        edges.update(_folder(t) for t in targets if _folder(t) != _folder(module))
    return folders


def _cycles_between(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's walk)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_folders() -> None:
    """Every import, lazy or for annotations only, lifted to its folder: no two folders (or
    top-level modules) import each other, however far round."""
    assert _cycles_between(_folder_graph()) == []


def test_the_folder_walk_sees_a_cycle() -> None:
    """The walk can fail: one arrow back from run/ to environment closes a loop."""
    graph = {folder: set(targets) for folder, targets in _folder_graph().items()}
    graph["run"].add("environment")
    assert any({"run", "environment"} <= set(c) for c in _cycles_between(graph))


def _layer(folder: str) -> int:
    return next((i for i, layer in enumerate(LAYERS) if folder in layer), len(LAYERS))  # unplaced: see the test above


def test_every_folder_has_a_layer() -> None:
    placed = set().union(*LAYERS)
    assert sorted(set(_folder_graph()) - placed) == [], "place a new folder or module in LAYERS"
    assert sorted(placed - set(_folder_graph())) == [], "LAYERS names a folder that is gone"


def test_arrows_run_down_the_layers() -> None:
    """An import from a lower layer into a higher one is an arrow up; at most MAX_ARROWS_UP."""
    up = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _layer(_folder(target)) > _layer(_folder(module))
    )
    assert len(up) <= MAX_ARROWS_UP, up


#: What cli/fast/ may import: the standard library (and its own package).
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


def test_cli_fast_imports_only_the_standard_library() -> None:
    """`sd --help`, `sd run` and `sd check` start without typer: what reads their command
    lines imports nothing but the standard library and cli/fast/ itself, even lazily."""
    outside: dict[str, list[str]] = {}
    for path in sorted((PACKAGE / "cli" / "fast").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            else:
                continue
            for name in names:
                own = name.startswith(".") and name.count(".", 0, len(name) - len(name.lstrip("."))) == 1
                if not own and name.split(".")[0] not in STDLIB:
                    outside.setdefault(path.name, []).append(name)
    assert outside == {}
