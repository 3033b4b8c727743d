"""Test files in folders without an `__init__.py` are imported by their base name (pytest's
rootdir-relative "prepend" mode), so two of them with one name stop `make test` at collection
(seen: tests/unit/ and tests/integration/ both had test_retry_masked.py)."""

from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)
TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_outside_packages_share_a_base_name():
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            where[path.name].append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in where.items() if len(paths) > 1}
