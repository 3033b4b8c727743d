"""What the run has done so far, folded from its events; drives the live display and completion."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from rich.table import Table

from treegrpo import events
from treegrpo.advantages import dropped_reason
from treegrpo.events import INFRASTRUCTURE, Kind, Status
from treegrpo.runner._faults import restored_line
from treegrpo.v1 import events_pb2 as pb


@dataclass
class TaskProgress:
    rounds_done: int = 0
    round_now: int = 0
    sampled: int = 0
    executed: int = 0  # nodes' recorded executions, every attempt's (the grader grades each)
    graded: int = 0
    statuses: Counter = field(default_factory=Counter)  # each node's newest attempt's
    retried: int = 0  # retry attempts graded (--retry-masked): counted in `statuses`, not in `graded` again
    best: float | None = None  # the best test_metric of the latest completed round
    round_best: dict[int, tuple[float, float]] = field(default_factory=dict)  # round: (oriented, test_metric)


@dataclass
class Progress:
    tasks: list[str]
    rounds: int
    train: bool
    started: float = field(default_factory=time.time)
    per_task: dict[str, TaskProgress] = field(default_factory=dict)
    groups_scored: int = 0
    groups_dropped: int = 0  # too few siblings left after infrastructure faults: nothing to train
    learner_steps: int = 0
    groups_trained: int = 0
    groups_with_signal: int = 0
    policy_version: int = 0
    loaded_version: int = 0
    dead_letters: int = 0
    completed_by: str = ""
    last_step_at: float = 0.0
    # when the watcher first saw every round complete: the learner cannot start the last round's
    # step before then, so its idle wait counts from here, not from the step before
    rollout_done_at: float = 0.0
    seen: set[str] = field(default_factory=set)
    notices: list[str] = field(default_factory=list)  # one-off lines for the screen, taken by the runner

    def __post_init__(self) -> None:
        for t in self.tasks:
            self.per_task.setdefault(t, TaskProgress())

    def apply(self, event: pb.Event) -> None:
        if event.envelope.event_id in self.seen:  # a replayed or duplicate fact counts once
            return
        self.seen.add(event.envelope.event_id)
        kind = events.kind_of(event)
        b = events.body_of(event)
        tp = self.per_task.get(getattr(b, "task", ""), None)
        if kind == Kind.ROUND_STARTED and tp:
            tp.round_now = max(tp.round_now, b.round)
        elif kind == Kind.ROUND_COMPLETED and tp:
            tp.rounds_done += 1
            if b.round in tp.round_best:  # the round's summary is a projection of its graded nodes
                tp.best = tp.round_best[b.round][1]
        elif kind == Kind.NODE_SAMPLED and tp:
            tp.sampled += 1
        elif kind == Kind.NODE_EXECUTED and tp:
            tp.executed += 1
        elif kind == Kind.NODE_GRADED and tp:
            if b.attempt > 1:  # a masked node's retry: the node counts once, with its newest status
                tp.retried += 1
                tp.statuses[INFRASTRUCTURE] -= 1 if tp.statuses[INFRASTRUCTURE] > 0 else 0
            else:
                tp.graded += 1
            tp.statuses[b.status] += 1
            if (
                b.status == Status.OK
                and b.HasField("oriented")
                and b.HasField("test_metric")
                and b.oriented > tp.round_best.get(b.round, (float("-inf"),))[0]
            ):
                tp.round_best[b.round] = (b.oriented, b.test_metric)
        elif kind == Kind.GROUP_SCORED:
            self.groups_scored += 1
            self.groups_dropped += bool(dropped_reason([m.status for m in b.members]))
        elif kind == Kind.LEARNER_STEPPED:
            self.learner_steps += 1
            self.groups_trained += len(b.sibling_groups)
            self.groups_with_signal += b.groups_with_signal
            self.policy_version = max(self.policy_version, b.policy_version)
            self.last_step_at = time.time()
        elif kind == Kind.POLICY_LOADED:
            self.loaded_version = max(self.loaded_version, b.version)
        elif kind == Kind.RUN_COMPLETED:
            self.completed_by = event.envelope.producer
        elif kind == Kind.LEARNER_RESTORED and event.envelope.time >= self.started:  # not a past attempt's
            self.notices.append(restored_line(b))

    def take_notices(self) -> list[str]:
        out, self.notices = [line for line in self.notices if line], []
        return out

    @property
    def rollout_done(self) -> bool:
        return all(tp.rounds_done >= self.rounds for tp in self.per_task.values())

    @property
    def training_done(self) -> bool:
        return not self.train or self.learner_steps >= self.rounds

    @property
    def ungraded(self) -> int:
        """Executions recorded whose grade has not come yet (every attempt's)."""
        return sum(max(0, tp.executed - tp.graded - tp.retried) for tp in self.per_task.values())

    @property
    def retried(self) -> int:
        return sum(tp.retried for tp in self.per_task.values())

    def status_counts(self) -> Counter:
        total: Counter = Counter()
        for tp in self.per_task.values():
            total.update(tp.statuses)
        return total

    def table(
        self, services: dict[str, tuple[bool, int, str]] | None = None, faults: list[str] | None = None
    ) -> Table:
        elapsed = time.time() - self.started
        t = Table(
            title=f"treegrpo — {elapsed:,.0f}s — learner steps {self.learner_steps} · "
            f"policy v{self.policy_version} (sampler serves v{self.loaded_version}) · "
            f"groups {self.groups_scored} scored, {self.groups_trained} trained, "
            f"{self.groups_with_signal} with signal"
            + (f", {self.groups_dropped} dropped (infrastructure)" if self.groups_dropped else "")
            + (f" · {retried} retried node(s) graded" if (retried := self.retried) else ""),
            title_justify="left",
        )
        cols = ("task", "round", "sampled", "graded", "ok", "crashed", "timeout", "other", "infra", "best")
        for col in cols:
            t.add_column(col, justify="right" if col != "task" else "left")
        shown = (Status.OK, Status.CRASHED, Status.TIMEOUT, INFRASTRUCTURE)
        for name, tp in self.per_task.items():
            st = tp.statuses
            other = sum(v for k, v in st.items() if k not in shown)
            t.add_row(
                name,
                f"{tp.rounds_done}/{self.rounds} (r{tp.round_now})",
                str(tp.sampled),
                str(tp.graded),
                f"[green]{st[Status.OK]}[/]",
                f"[red]{st[Status.CRASHED]}[/]",
                f"[yellow]{st[Status.TIMEOUT]}[/]",
                str(other),
                f"[magenta]{st[INFRASTRUCTURE]}[/]" if st[INFRASTRUCTURE] else "0",
                "—" if tp.best is None else f"{tp.best:.4g}",
            )
        if services:
            line = "  ".join(
                f"{'[green]' if alive else '[red]'}{n}[/] ({state}, {r} restarts)"
                for n, (alive, r, state) in services.items()
            )
            t.caption = line
        if faults:  # what is wrong right now, under the table until it clears
            t.caption = "\n".join([*(f"[bold red]! {f}[/]" for f in faults), t.caption or ""]).rstrip()
        return t
