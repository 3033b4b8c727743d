"""No module of ours imports itself back, through any chain: the graph counts every import
statement, those under `if TYPE_CHECKING:` and inside functions included.

import-linter's contracts (pyproject.toml) do not say this: they forbid imports between the five
root packages and between the core's layers, but a cycle inside one package (two modules of the
learner, or a package and its own submodule) breaks none of them. So the graph is built here, from
the source with `ast`, over the core and the four service packages."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("sampler", "executor", "grader", "learner")


def package_dirs(root: Path) -> dict[str, Path]:
    """The five root packages of a checkout: name -> folder."""
    out = {"treegrpo": root / "treegrpo"}
    out.update({f"treegrpo_{s}": root / "services" / s / f"treegrpo_{s}" for s in SERVICES})
    return out


def module_files(packages: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the packages (a package is its __init__)."""
    out = {}
    for folder in packages.values():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imported_names(module: str, path: Path) -> set[str]:
    """Every name an import statement of the file names, wherever the statement stands
    (`from pkg import x` names `pkg.x`)."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package up
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def import_graph(packages: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports. `from pkg import name` counts as importing
    `pkg.name` when that is a module, else `pkg` (its __init__): the module that holds the name."""
    files = module_files(packages)
    graph = {}
    for module, path in files.items():
        edges = set()
        for name in imported_names(module, path):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def test_no_module_of_the_five_packages_imports_itself_back():
    graph = import_graph(package_dirs(ROOT))
    assert len(graph) > 250  # the whole of the five packages was read, not an empty folder
    assert cycles(graph) == []


@pytest.mark.parametrize(
    "planted",
    [
        "if TYPE_CHECKING:\n    from treegrpo_learner._run_learner import RunLearner\n",
        "def _later():\n    from ._run_learner import RunLearner\n\n    return RunLearner\n",
        "from treegrpo_learner import _run_learner\n",
    ],
    ids=["type-checking", "relative-in-a-function", "from-package-import-module"],
)
def test_a_planted_cycle_is_found_whatever_guards_the_import(tmp_path, planted):
    learner = tmp_path / "treegrpo_learner"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(package_dirs(ROOT)["treegrpo_learner"], learner, ignore=skip)
    buffer = learner / "_buffer.py"  # _run_learner imports _buffer: importing it back closes a cycle
    buffer.write_text(buffer.read_text() + "\nfrom typing import TYPE_CHECKING\n" + planted)
    found = cycles(import_graph({"treegrpo_learner": learner}))
    assert any({"treegrpo_learner._buffer", "treegrpo_learner._run_learner"} <= set(c) for c in found), found
