"""GPU-idle guard policy against scripted utilisation traces (no GPU needed)."""

from __future__ import annotations

import asyncio

from treegrpo_executor import IdlePolicy, TraceReader, watch


def run_trace(trace: list[tuple[float, float | None]], grace: float, threshold: float = 1.0) -> float | None:
    """Feed (t, util) samples; return the time the policy killed, or None."""
    policy = IdlePolicy(grace_s=grace, threshold_pct=threshold)
    for t, util in trace:
        if policy.observe(t, util):
            return t
    return None


def test_a_gpu_idle_from_the_start_is_killed_once_the_grace_has_passed():
    trace = [(t, 0.0) for t in range(0, 400, 2)]
    assert run_trace(trace, grace=180) == 180


def test_a_busy_gpu_is_never_killed():
    trace = [(t, 35.0 + (t % 7)) for t in range(0, 2000, 2)]
    assert run_trace(trace, grace=180) is None


def test_cpu_preprocessing_shorter_than_the_grace_then_training_survives():
    trace = [(t, 0.0) for t in range(0, 170, 2)] + [(t, 90.0) for t in range(170, 1000, 2)]
    assert run_trace(trace, grace=180) is None


def test_idleness_must_be_unbroken_a_burst_resets_the_clock():
    trace = [(t, 0.0 if t % 100 else 80.0) for t in range(0, 1000, 2)]  # a busy sample every 100 s
    assert run_trace(trace, grace=180) is None


def test_a_gpu_that_goes_idle_after_training_is_killed_grace_seconds_later():
    trace = [(t, 70.0) for t in range(0, 300, 2)] + [(t, 0.4) for t in range(300, 900, 2)]
    assert run_trace(trace, grace=120, threshold=1.0) == 420


def test_unreadable_utilisation_counts_as_idle():
    trace = [(t, None) for t in range(0, 200, 2)]
    assert run_trace(trace, grace=60) == 60


def test_mean_utilisation_is_recorded_from_readable_samples():
    p = IdlePolicy(grace_s=100)
    for t, u in [(0, 10.0), (1, None), (2, 30.0)]:
        p.observe(t, u)
    assert p.mean_util == 20.0


async def test_watch_loop_with_a_trace_reader_calls_the_kill_once():
    now = [0.0]

    def tick() -> float:  # one simulated second per sample
        now[0] += 1.0
        return now[0]

    reader = TraceReader([(0, 50.0), (10, 0.0)], clock=lambda: now[0])
    killed: list[float] = []
    policy = IdlePolicy(grace_s=20)
    await asyncio.wait_for(
        watch(reader, "0", policy, poll_s=0, on_idle=lambda: killed.append(now[0]), clock=tick), 5
    )
    assert killed == [31.0]
    assert policy.samples[:3] == [50.0, 50.0, 50.0]
