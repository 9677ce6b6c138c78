"""The code's layout rules (issue 41), checked on the source: no import cycles among the project's modules counting
imports inside functions, every import inside a function says why it is there, and a small pipeline/ top level."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "kernels", "pipeline", "bench", "eval", "flows", "schemas")
MAX_PIPELINE_TOP_LEVEL_FILES = 10


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules `module` imports anywhere in its body (top level or inside functions)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            names = submodules or [base]  # `from pkg import submodule` needs the submodule, not a cycle via pkg
        else:
            continue
        found |= {owner for name in names if (owner := _owner(name, modules)) and owner != module}
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    modules = _modules()
    graph = {m: _imports(m, p, modules) & set(modules) for m, p in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _unexplained_lazy_imports(path: Path) -> list[int]:
    """Line numbers of imports inside functions with no comment on the line, nor above the run of imports it
    belongs to."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or "#" in lines[node.lineno - 1]:
                continue
            above = node.lineno - 2
            while above >= 0 and lines[above].strip().startswith(("import ", "from ")) and "#" not in lines[above]:
                above -= 1  # the run of imports this one belongs to
            if not (above >= 0 and "#" in lines[above]):
                out.append(node.lineno)
    return out


def test_every_import_inside_a_function_says_why() -> None:
    missing = {str(p.relative_to(REPO)): lines for p in _modules().values()
               if (lines := _unexplained_lazy_imports(p))}
    assert missing == {}


def test_pipeline_top_level_is_small_and_bench_and_eval_are_packages() -> None:
    top = sorted(p.name for p in (REPO / "pipeline").glob("*.py"))
    assert len(top) <= MAX_PIPELINE_TOP_LEVEL_FILES, top
    assert (REPO / "bench" / "__init__.py").is_file() and (REPO / "eval" / "__init__.py").is_file()
