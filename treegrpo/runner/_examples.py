"""The example run files shipped with the package (`treegrpo/examples/*.toml`, package data), so an
installed treegrpo runs `treegrpo demo` or `treegrpo run run-small` without a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

DEMO = "demo"


def examples_dir() -> Path:
    """Found through importlib.resources; a wheel installs as plain files, so it is a real folder."""
    return Path(str(resources.files("treegrpo") / "examples"))


def example(name: str) -> Path:
    """The shipped example run file `treegrpo/examples/<name>.toml`."""
    return examples_dir() / f"{name}.toml"


def example_names() -> list[str]:
    return sorted(p.stem for p in examples_dir().glob("*.toml"))


def resolve_run_file(arg: str | Path | None) -> Path | None:
    """A run file that exists as given; else, for a bare name (`run-small` or `run-small.toml`), the
    shipped example of that name; else the path as given (loading it then says it is missing)."""
    if arg is None:
        return None
    path = Path(arg)
    if path.exists() or len(path.parts) != 1:
        return path
    shipped = example(path.stem if path.suffix == ".toml" else path.name)
    return shipped if shipped.is_file() else path
