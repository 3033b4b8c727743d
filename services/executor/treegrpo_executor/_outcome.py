"""What a backend is asked to run (Job, Limits) and what it reports back (Outcome).

Also the two readings of a script's output every backend shares: the exception class name from a
Python traceback (`exc_type`, the seed's field) and the last lines of output (`term_tail`).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

from treegrpo.events import Status
from treegrpo_executor._gate import Declaration
from treegrpo_executor.config import ExecutorConfig

GIB = 2**30
OK, CRASHED, TIMEOUT, NO_CODE, NO_SUBMISSION = (
    Status.OK,
    Status.CRASHED,
    Status.TIMEOUT,
    Status.NO_CODE,
    Status.NO_SUBMISSION,
)
SUBMISSION = Path("submission") / "submission.csv"
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::.*)?$")
_EXC_NAME = re.compile(r"(Error|Exception|Exit|Interrupt|Warning|Iteration|Failure)$")


@dataclass(frozen=True)
class Limits:
    """What one node may use, after the gate and the caps."""

    cpu: float
    mem_gib: float
    ephemeral_gib: float
    gpu: int
    timeout_s: float
    nproc: int
    nofile: int
    output_bytes: int

    @classmethod
    def for_node(cls, decl: Declaration, cfg: ExecutorConfig) -> Limits:
        r = decl.resources or {}
        g, c = cfg.gate, cfg.caps
        return cls(
            cpu=min(float(r.get("cpu", g.default_cpu)), c.cpu),
            mem_gib=min(float(r.get("mem", g.default_mem)), c.mem_gib),
            ephemeral_gib=min(float(r.get("ephemeral", g.default_ephemeral)), c.ephemeral_gib),
            gpu=int(r.get("gpu", 0)),
            timeout_s=cfg.timeout_s,
            nproc=c.nproc,
            nofile=c.nofile,
            output_bytes=c.output_bytes,
        )


@dataclass(frozen=True)
class Job:
    run_id: str
    node_id: str
    task: str
    code: str
    limits: Limits


@dataclass
class Timings:
    pending: float = 0.0
    stage: float = 0.0
    exec: float = 0.0
    retrieve: float = 0.0


@dataclass
class Outcome:
    status: str
    exc_type: str | None = None
    exec_time: float = 0.0
    term_tail: str = ""
    where: str = ""
    timings: Timings = field(default_factory=Timings)
    gpu_util: float | None = None
    submission: bytes | None = None  # the submission.csv bytes, read before the workspace is removed


def exc_type_from_output(text: str) -> str | None:
    """The exception class of the last Python traceback in `text` (short name, as `type(e).__name__`).

    A SyntaxError at compile time prints no 'Traceback' header, so an unindented `Name: message`
    line whose name looks like an exception class is accepted too."""
    lines = text.splitlines()
    start = max(
        (i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
        default=-1,
    )
    for line in lines[start + 1 :] if start >= 0 else []:
        m = _EXC_LINE.match(line)
        if m and not line.startswith((" ", "\t", "Traceback")):
            return m.group(1).rsplit(".", 1)[-1]
    for line in reversed(lines):
        m = _EXC_LINE.match(line)
        if m and _EXC_NAME.search(m.group(1)):
            return m.group(1).rsplit(".", 1)[-1]
    return None


def signal_name(code: int) -> str | None:
    """128+N exit codes (the launcher's convention) as a signal name, e.g. 'SIGKILL'."""
    if code <= 128:
        return None
    try:
        return signal.Signals(code - 128).name
    except ValueError:
        return None


def tail(text: str, lines: int, max_bytes: int) -> str:
    kept = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    data = kept.encode("utf-8", "replace")
    if len(data) > max_bytes:
        kept = data[-max_bytes:].decode("utf-8", "ignore")
    return kept
