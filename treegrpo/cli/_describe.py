"""One human-readable line per event, for `tail` and `events`."""

from __future__ import annotations

from treegrpo import events
from treegrpo.events import Kind, Status
from treegrpo.v1 import events_pb2 as pb

STATUS_STYLE = {
    Status.OK: "green",
    Status.CRASHED: "red",
    Status.TIMEOUT: "yellow",
    Status.NO_CODE: "magenta",
    Status.NO_SUBMISSION: "magenta",
    Status.INVALID_SUBMISSION: "yellow",
}


def _metric(value: float | None) -> str:
    return "—" if value is None else f"{value:.5g}"


def describe(event: pb.Event) -> tuple[str, str]:
    b = events.body_of(event)
    kind = events.kind_of(event)
    if kind == Kind.NODE_SAMPLED:  # its tokens are in its tokens.recorded (inline in older runs)
        tokens = "" if b.tokens_recorded else f"{len(b.response_token_ids)} tok, "
        return "cyan", (
            f"{b.node_id} {b.task} r{b.round} s{b.step} {b.mode:<7} v{b.policy_version} "
            f"{tokens}{len(b.code.splitlines())} lines"
        )
    if kind == Kind.TOKENS_RECORDED:
        return "dim", (f"{b.node_id} {len(b.prompt_token_ids)} prompt tok, {len(b.response_token_ids)} tok")
    if kind == Kind.NODE_EXECUTED:
        style = STATUS_STYLE.get(b.status, "white")
        exc = f" {b.exc_type}" if b.HasField("exc_type") else ""
        again = f" (attempt {b.attempt})" if b.attempt > 1 else ""
        return style, f"{b.node_id}{again} {b.status}{exc} in {b.exec_time:.1f}s {b.where}"
    if kind == Kind.NODE_GRADED:
        style = STATUS_STYLE.get(b.status, "white")
        metric = _metric(b.test_metric if b.HasField("test_metric") else None)
        err = f" ({b.grade_error})" if b.HasField("grade_error") else ""
        again = f" (attempt {b.attempt})" if b.attempt > 1 else ""
        return style, f"{b.node_id}{again} {b.status} test={metric}{err}"
    if kind == Kind.NODE_RETRIED:
        return "magenta", f"{b.node_id} {b.task} r{b.round} s{b.step}: attempt {b.attempt} ({b.reason[:120]})"
    if kind == Kind.GROUP_SCORED:
        rewards = " ".join(f"{m.reward:+.2f}" for m in b.members)
        return "blue", f"{b.sibling_group} {b.task} r{b.round} s{b.step}: {rewards}"
    if kind == Kind.GROUP_RESPENT:
        return (
            "yellow" if b.extra_siblings else "dim"
        ), f"{b.sibling_group} {b.task} r{b.round} s{b.step}: {b.reason}"
    if kind == Kind.LEARNER_STEPPED:
        phases = ", ".join(
            f"{f.name}={getattr(b.phases_s, f.name):.1f}s"
            for f in b.phases_s.DESCRIPTOR.fields
            if b.phases_s.HasField(f.name)
        )
        return "bold magenta", (
            f"step {b.step} -> v{b.policy_version} {b.total_s:.1f}s; "
            f"{b.groups_with_signal}/{len(b.sibling_groups)} groups with signal; {phases}"
        )
    if kind == Kind.ROUND_STARTED:
        return "bold", f"{b.task} round {b.round} v{b.policy_version}"
    if (
        kind == Kind.ROUND_COMPLETED
    ):  # only an imported round carries its summary; a live one is the fact alone
        best = _metric(b.best_test_metric if b.HasField("best_test_metric") else None)
        extra = f" {b.valid}/{b.nodes} valid, best={best}" if b.nodes else " complete"
        return "bold", f"{b.task} round {b.round}{extra}"
    if kind == Kind.LEARNER_RESTORED:
        return ("bold yellow" if b.lost or b.skipped else "magenta"), events.describe_restored(b)
    if kind == Kind.POLICY_PUBLISHED:
        return "bold green", f"v{b.version} {b.bytes / 1e6:.1f} MB sha256 {b.sha256[:12]}"
    if kind == Kind.POLICY_LOADED:
        return "green", f"v{b.version} on {b.sampler_id} in {b.load_seconds:.2f}s"
    if kind == Kind.RUN_STARTED:
        return "bold", f"tasks={list(b.tasks)} rounds={b.rounds} train={b.train} staleness={b.max_staleness}"
    if kind == Kind.RUN_COMPLETED:
        return "bold", f"{b.outcome} {b.reason}"
    if kind == Kind.RUN_ENDED:
        style = {"completed": "bold green", "stopped": "yellow"}.get(b.outcome, "bold red")
        return style, f"attempt {b.attempt} {b.outcome} {b.reason}"
    if kind == Kind.RUN_RESUMED:
        return "bold", f"attempt {b.attempt}"
    if kind == Kind.DEAD_LETTERED:
        return "red", f"{b.consumer} {b.subject}: {b.reason}"
    return "white", str(b)[:120]
