"""The public surface of each distribution (the core `treegrpo` and the four services), pinned.

A package's public names are its `__all__`: every listed name imports, nothing else of ours is public
in its namespace by accident (the rule: an attribute without a leading `_` that is not a submodule
and was defined by one of our packages must be listed), and the lists and the public modules (a
dotted path with no `_name` part) equal the pinned `public_surface.txt`, so a change to what users may
import is a visible diff in review. After a deliberate change, write the file again:
`python tests/unit/test_exports.py > tests/unit/public_surface.txt`.
"""

from __future__ import annotations

import difflib
import importlib
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).with_name("public_surface.txt")
DISTRIBUTIONS = {  # distribution -> the folder holding its top-level package
    "treegrpo": ROOT,
    "treegrpo_sampler": ROOT / "services" / "sampler",
    "treegrpo_executor": ROOT / "services" / "executor",
    "treegrpo_grader": ROOT / "services" / "grader",
    "treegrpo_learner": ROOT / "services" / "learner",
}
SKIP_DIRS = {"corpus"}  # package data (the SFT corpus's scripts, with the learner), not code anyone imports
NOT_OURS = {"TYPE_CHECKING"}  # a bool: no module to tell where it came from


def public_modules(dist: str) -> list[str]:
    """Public modules of a distribution, read from its files (nothing imported: vLLM, torch)."""
    base = DISTRIBUTIONS[dist]
    found = []
    for path in sorted((base / dist).rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if SKIP_DIRS & set(parts) or any(p.startswith("_") for p in parts):
            continue
        found.append(".".join(parts))
    return found


def exporting_packages() -> list[str]:
    """The public packages that declare `__all__` (a package's `__init__.py` naming it)."""
    return [
        m
        for dist in DISTRIBUTIONS
        for m in public_modules(dist)
        if (DISTRIBUTIONS[dist] / m.replace(".", "/") / "__init__.py").is_file()
        and "__all__" in (DISTRIBUTIONS[dist] / m.replace(".", "/") / "__init__.py").read_text()
    ]


def unlisted(module: types.ModuleType) -> set[str]:
    """Public names of ours in a package's namespace that its `__all__` does not list."""
    listed = set(getattr(module, "__all__", ()))
    extra = set()
    for name, value in vars(module).items():
        if name.startswith("_") or name in listed or name in NOT_OURS or isinstance(value, types.ModuleType):
            continue
        origin = getattr(value, "__module__", None)
        if not isinstance(origin, str) or origin.split(".")[0] in DISTRIBUTIONS:
            extra.add(name)  # defined by us (a constant has no module: it is ours)
    return extra


def surface() -> list[str]:
    """The pinned form: `pkg.mod` per public module, `pkg:Name` per exported name."""
    lines = [m for dist in DISTRIBUTIONS for m in public_modules(dist)]
    for pkg in exporting_packages():
        lines += [f"{pkg}:{name}" for name in sorted(importlib.import_module(pkg).__all__)]
    return lines


def test_every_distribution_has_a_listed_public_surface():
    packages = exporting_packages()
    assert set(DISTRIBUTIONS) - {"treegrpo"} <= set(packages)  # each service lists its names
    assert {"treegrpo.bus", "treegrpo.config", "treegrpo.tasks"} <= set(packages)


@pytest.mark.parametrize("package", exporting_packages())
def test_every_listed_name_imports(package):
    module = importlib.import_module(package)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


@pytest.mark.parametrize("package", exporting_packages())
def test_nothing_of_ours_is_public_in_a_package_without_being_listed(package):
    extra = unlisted(importlib.import_module(package))
    assert not extra, f"list these in {package}.__all__ or give them a leading _: {sorted(extra)}"


def test_the_rule_flags_an_unlisted_name_of_ours_and_passes_a_foreign_import():
    planted = types.ModuleType("treegrpo_planted")
    planted.__all__ = ["Listed"]
    planted.Listed = type("Listed", (), {"__module__": "treegrpo.x"})
    planted.Forgotten = type("Forgotten", (), {"__module__": "treegrpo_sampler._y"})
    planted.LIMIT = 3
    planted.Path = Path  # imported for the package's own use: pathlib's, not ours
    planted.TYPE_CHECKING = False
    assert unlisted(planted) == {"Forgotten", "LIMIT"}


def test_the_public_surface_equals_the_pinned_list():
    pinned = [ln for ln in PINNED.read_text().splitlines() if ln and not ln.startswith("#")]
    now = surface()
    diff = "\n".join(difflib.unified_diff(pinned, now, "pinned", "now", lineterm=""))
    assert pinned == now, f"the public surface changed; if on purpose, write the file again:\n{diff}"


if __name__ == "__main__":
    print("# The public surface, pinned by tests/unit/test_exports.py (regenerate: see its docstring).")
    print("# `pkg.mod`: a public module; `pkg:Name`: a name its __all__ lists.")
    sys.stdout.write("".join(f"{line}\n" for line in surface()))
