"""EngineCounts: the vLLM engine's per-step scheduler and iteration stats, summed (no vLLM needed:
the stats are plain objects with vLLM's field names)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from treegrpo_sampler.backends import EngineCounts


def scheduler(requests=0, queries=0, hits=0, running=0, waiting=0, kv=0.0):
    prefix = SimpleNamespace(requests=requests, queries=queries, hits=hits)
    return SimpleNamespace(
        prefix_cache_stats=prefix, num_running_reqs=running, num_waiting_reqs=waiting, kv_cache_usage=kv
    )


@pytest.mark.timeout(10)
def test_engine_counts_sum_prefix_hits_and_keep_peaks():
    counts = EngineCounts()
    counts.add_scheduler(scheduler(requests=16, queries=16 * 2048, hits=15 * 2032, running=16, kv=0.2))
    counts.add_scheduler(scheduler(running=64, waiting=3, kv=0.7))
    counts.add_scheduler(scheduler(requests=16, queries=16 * 2048, hits=16 * 2032, running=32, kv=0.5))
    counts.add_iteration(SimpleNamespace(num_generation_tokens=64, num_preempted_reqs=2))
    assert counts.requests == 32 and counts.prompt_tokens == 32 * 2048
    assert counts.prompt_tokens_cached == 31 * 2032
    assert counts.cached_share == pytest.approx(31 * 2032 / (32 * 2048))
    assert (counts.running_peak, counts.waiting_peak, counts.kv_usage_peak) == (64, 3, 0.7)
    assert (counts.generated_tokens, counts.preempted) == (64, 2)
    snap = counts.snapshot()
    assert snap["cached_share"] == round(counts.cached_share, 4) and snap["requests"] == 32


@pytest.mark.timeout(10)
def test_engine_counts_read_a_missing_field_as_zero_and_reset_to_nothing():
    """vLLM calls its stats unstable: a renamed field must read as zero, not break the engine."""
    counts = EngineCounts()
    counts.add_scheduler(SimpleNamespace())
    counts.add_iteration(SimpleNamespace())
    assert counts.snapshot() == {**EngineCounts().snapshot()}
    counts.add_scheduler(scheduler(requests=4, queries=40, hits=30))
    assert counts.cached_share == 0.75
    counts.reset()
    assert counts.snapshot() == EngineCounts().snapshot() and counts.cached_share == 0.0
