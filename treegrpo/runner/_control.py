"""`treegrpo run CONFIG --control`: the train arm, then its paired no-train control, then the verdict.

The control is the same typed run file with `run.train=false` and the run id
`<train_id>-control`: the same seed, tasks, prompts and tree shape. The sampler's seeds ignore the
run id, so both arms sample the same round 1 token for token; after round 1 only training differs.

The arms run one after the other, not side by side: two runs on one NATS still interfere (their
services share consumer names until runs are isolated per run id), and on a machine of a few cores
two arms side by side take as long as one after the other anyway, each at half speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from treegrpo.bus import Bus
from treegrpo.config import ConfigError
from treegrpo.runner._config import RunFile
from treegrpo.runner._execute import RunResult, execute, new_run_id
from treegrpo.runner._nats import open_nats

CONTROL_SUFFIX = "-control"


@dataclass
class PairedResult:
    train: RunResult
    control: RunResult | None
    report_dir: Path | None = None
    verdict: str | None = None
    line: str = ""

    @property
    def outcome(self) -> str:
        if self.train.outcome != "completed":
            return self.train.outcome
        return self.control.outcome if self.control is not None else "failed"


def arms(rf: RunFile) -> tuple[RunFile, RunFile]:
    """The two run files: train (as configured, run id fixed now) and its control."""
    spec = rf.spec()
    if not spec.train:
        raise ConfigError("--control pairs a training run with a no-train one; this run has run.train=false")
    run_id = spec.run_id or new_run_id()
    return rf.with_run(run_id=run_id), rf.with_run(run_id=run_id + CONTROL_SUFFIX, train=False)


async def compare_report(rf: RunFile, train_id: str, control_id: str, out_dir: Path):
    """The train arm's report rewritten with the control: curves of both arms, difference, verdict."""
    from treegrpo.report import build_report

    nats = open_nats(rf.runner.nats_url, what="treegrpo run --control (report)")
    try:
        bus = await Bus.connect(nats.url, "runner/control", 15)
        try:
            return await build_report(bus, [train_id], out_dir, control=control_id)
        finally:
            await bus.close()
    finally:
        nats.close()


async def execute_paired(rf: RunFile, console: Console, resume_cmd: str = "") -> PairedResult:
    """Both arms and the comparison under one lease on the home's NATS, so the embedded server
    is not stopped and started again between them."""
    train_rf, control_rf = arms(rf)
    held = open_nats(train_rf.runner.nats_url, what="treegrpo run --control")
    try:
        return await _paired(train_rf, control_rf, console, resume_cmd)
    finally:
        held.close()


async def _paired(train_rf: RunFile, control_rf: RunFile, console: Console, resume_cmd: str) -> PairedResult:
    from treegrpo.report import verdict_line

    console.print("[bold]arm 1/2: train[/]")
    train = await execute(train_rf, console=console, resume_cmd=resume_cmd)
    if train.outcome != "completed":
        return PairedResult(train, None)
    console.print("[bold]arm 2/2: control[/] (the same seed, tasks, prompts and tree; no training)")
    control = await execute(control_rf, console=console, resume_cmd=resume_cmd)
    result = PairedResult(train, control)
    if control.outcome != "completed":
        return result
    rep = await compare_report(train_rf, train.run_id, control.run_id, train.out_dir / "report")
    result.report_dir, result.verdict = rep.out_dir, rep.comparison.verdict
    result.line = verdict_line(rep.comparison)
    console.print(f"[bold]{result.line}[/]", soft_wrap=True)  # one line each, whatever the width: grep-able
    console.print(
        f"curves: {rep.out_dir / 'learning_vs_control.png'}, {rep.out_dir / 'learning_curves.png'}; "
        f"report: {rep.markdown_path}",
        soft_wrap=True,
    )
    console.print(f"explorer: {rep.html_path.resolve().as_uri()}", soft_wrap=True)
    return result
