"""Tests use public names: a test that imports one of our private modules (a dotted path with a
`_name` part, or a `_name` from a package) says so in its module docstring, naming each such module
in full after the words "a private module", so reaching past a package's surface is a visible,
deliberate choice (issue 30). The files are parsed, not imported: this test runs in milliseconds."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("treegrpo", "treegrpo_sampler", "treegrpo_executor", "treegrpo_grader", "treegrpo_learner")


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def private_imports(tree: ast.Module) -> set[str]:
    """The private modules of ours a parsed file imports (anywhere, function bodies included)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in OURS and _private(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in OURS:
                continue
            if _private(node.module):
                found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")}
    return found


def undeclared(source: str) -> set[str]:
    """The private modules a test file imports without naming them in its docstring."""
    tree = ast.parse(source)
    used = private_imports(tree)
    doc = ast.get_docstring(tree) or ""
    if not used:
        return set()
    if "a private module" not in doc.lower():
        return used
    return {m for m in used if m not in doc}


def test_every_test_importing_a_private_module_names_it_in_its_docstring():
    offenders = {
        str(p.relative_to(ROOT)): sorted(bad)
        for p in sorted((ROOT / "tests").rglob("*.py"))
        if (bad := undeclared(p.read_text()))
    }
    assert not offenders, (
        f"import the public name, or say 'a private module: <name>' in the docstring: {offenders}"
    )


def test_the_rule_catches_an_undeclared_private_import_and_accepts_a_declared_one():
    body = "from treegrpo_learner._loss import policy_loss\nimport treegrpo.tasks._builtin\n"
    assert undeclared('"""Loss tests."""\n' + body) == {"treegrpo_learner._loss", "treegrpo.tasks._builtin"}
    named = '"""Loss tests; a private module: treegrpo_learner._loss, treegrpo.tasks._builtin."""\n'
    assert undeclared(named + body) == set()
    half = '"""A private module: treegrpo_learner._loss."""\n'
    assert undeclared(half + body) == {"treegrpo.tasks._builtin"}


def test_the_rule_sees_private_names_and_imports_inside_functions_but_not_public_ones():
    src = (
        '"""x"""\nfrom treegrpo_learner import _checkpoint\nfrom treegrpo.bus import Bus\n'
        "def f():\n    from treegrpo_sampler._adapters import VersionGate\n"
        "from json import _default_decoder\n"
    )
    assert undeclared(src) == {"treegrpo_learner._checkpoint", "treegrpo_sampler._adapters"}
