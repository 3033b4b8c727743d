"""Read a seed-format data root: runs, rounds, node records, summaries, timing lines.

Lenient where the seed is (both node schemas, partial last rounds, empty stub round files, rounds
with no summary, runs with no timing.jsonl) and loud where a file is broken: every malformed line
or file becomes a `Problem` naming the file and the 1-based line, and is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from treegrpo.archive._records import RecordError, parse_node, parse_summary, parse_timing
from treegrpo.archive._schema import NodeRecord, RoundSummary, TimingLine

NODE_FILE = re.compile(r"^(?P<task>.+?)__(?P<ts>\d+)\.jsonl$")
SUMMARY_FILE = re.compile(r"^(?P<task>.+?)__summary_(?P<ts>\d+)\.json$")
VIEW_FILE = re.compile(r"^.+__\d+__(tree\.txt|transcript\.md)$")
ROUND_DIR = re.compile(r"^round_(\d+)$")


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int  # 0 = the whole file
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class SeedRound:
    task: str
    round: int
    started_unix: int | None = None
    node_file: Path | None = None
    summary: RoundSummary | None = None
    completed_unix: int | None = None


@dataclass
class SeedRun:
    run_id: str
    path: Path
    rounds: list[SeedRound] = field(default_factory=list)
    timing: list[TimingLine] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def tasks(self) -> list[str]:
        return sorted({r.task for r in self.rounds})


def find_runs(root: str | Path) -> list[Path]:
    """Run directories under a data root, or the root itself when it is one run directory."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a directory")
    if _is_run(root):
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and _is_run(p))


def _is_run(p: Path) -> bool:
    return (p / "timing.jsonl").is_file() or any(ROUND_DIR.match(c.name) and c.is_dir() for c in p.iterdir())


def read_run(path: str | Path) -> SeedRun:
    """The run's layout, summaries and timing (node files are read on demand by `read_nodes`)."""
    path = Path(path)
    run = SeedRun(path.name, path)
    dirs = sorted(
        (int(m.group(1)), c) for c in path.iterdir() if c.is_dir() and (m := ROUND_DIR.match(c.name))
    )
    for n, d in dirs:
        run.rounds += _read_round_dir(n, d, run.problems)
    timing = path / "timing.jsonl"
    if timing.is_file():
        run.timing = [t for t in _lines(timing, parse_timing, run.problems)]
    return run


def _read_round_dir(n: int, d: Path, problems: list[Problem]) -> list[SeedRound]:
    rounds: dict[str, SeedRound] = {}
    for f in sorted(d.iterdir()):
        if m := NODE_FILE.match(f.name):
            r = rounds.setdefault(m["task"], SeedRound(m["task"], n))
            r.node_file, r.started_unix = f, int(m["ts"])
        elif m := SUMMARY_FILE.match(f.name):
            r = rounds.setdefault(m["task"], SeedRound(m["task"], n))
            r.completed_unix = int(m["ts"])
            try:
                r.summary = parse_summary(orjson.loads(f.read_bytes()))
            except (orjson.JSONDecodeError, RecordError) as exc:
                problems.append(Problem(f, 0, f"summary skipped: {exc}"))
        elif not VIEW_FILE.match(f.name):
            problems.append(Problem(f, 0, "not a file of the seed's layout; ignored"))
    for r in rounds.values():
        if r.node_file is None:
            problems.append(Problem(d, 0, f"{r.task}: a summary without a node-record file; round skipped"))
    return [r for _, r in sorted(rounds.items()) if r.node_file is not None]


def read_nodes(rnd: SeedRound, problems: list[Problem]) -> list[NodeRecord]:
    if rnd.node_file is None:
        return []
    return list(_lines(rnd.node_file, parse_node, problems))


def _lines(path: Path, parse, problems: list[Problem]) -> Iterator:
    with open(path, "rb") as fh:
        for i, raw in enumerate(fh, 1):
            if raw.isspace():
                continue
            try:
                yield parse(orjson.loads(raw))
            except orjson.JSONDecodeError as exc:
                problems.append(Problem(path, i, f"not JSON ({exc}); line skipped"))
            except RecordError as exc:
                problems.append(Problem(path, i, f"{exc}; line skipped"))
