"""What the vLLM engine saw while it served: prompt tokens found in the prefix cache, preemptions,
the KV cache's fullness, how many sequences ran at once.

The siblings of a group share one prompt, so with prefix caching all but the first sibling should
find that prompt's blocks cached (for the hybrid Qwen3.5 models only at block boundaries: vLLM's
"align" mode keeps the Gated DeltaNet state only there). Whether they do is a number worth seeing:
a group whose siblings each prefill 2k tokens costs 16x the prefill. vLLM hands these counts per
engine step to its stat loggers; the backend registers one (`counting_logger`) so the counts are
read in-process, without vLLM's periodic log lines. vLLM calls its scheduler stats unstable: every
field is read with a default, so a renamed one reads as zero instead of breaking the engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class EngineCounts:
    """Running totals since the engine started (or since `reset`)."""

    requests: int = 0  # sequences scheduled for the first time (a group of n counts n)
    prompt_tokens: int = 0  # prompt tokens those sequences asked the prefix cache for
    prompt_tokens_cached: int = 0  # ... and found there (not prefilled again)
    generated_tokens: int = 0
    preempted: int = 0  # sequences evicted for KV space and recomputed later
    running_peak: int = 0
    waiting_peak: int = 0
    kv_usage_peak: float = 0.0  # the KV cache's fullest moment, 0..1

    @property
    def cached_share(self) -> float:
        """Share of the prompt tokens that came from the prefix cache."""
        return self.prompt_tokens_cached / self.prompt_tokens if self.prompt_tokens else 0.0

    def reset(self) -> None:
        for name, value in asdict(EngineCounts()).items():
            setattr(self, name, value)

    def snapshot(self) -> dict[str, float]:
        return {**asdict(self), "cached_share": round(self.cached_share, 4)}

    def add_scheduler(self, stats: Any) -> None:
        prefix = getattr(stats, "prefix_cache_stats", None)
        if prefix is not None:
            self.requests += getattr(prefix, "requests", 0)
            self.prompt_tokens += getattr(prefix, "queries", 0)
            self.prompt_tokens_cached += getattr(prefix, "hits", 0)
        self.running_peak = max(self.running_peak, getattr(stats, "num_running_reqs", 0))
        self.waiting_peak = max(self.waiting_peak, getattr(stats, "num_waiting_reqs", 0))
        self.kv_usage_peak = max(self.kv_usage_peak, float(getattr(stats, "kv_cache_usage", 0.0)))

    def add_iteration(self, stats: Any) -> None:
        self.generated_tokens += getattr(stats, "num_generation_tokens", 0)
        self.preempted += getattr(stats, "num_preempted_reqs", 0)


def counting_logger(counts: EngineCounts):
    """A per-engine stat-logger factory for `AsyncLLM.from_engine_args(stat_loggers=[...])` that adds
    every step's stats to `counts`; None where this vLLM build has no stat-logger interface."""
    try:
        from vllm.v1.metrics.loggers import StatLoggerBase
    except ImportError:
        return None

    class CountingLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any = None, engine_index: int = 0):
            self.engine_index = engine_index

        def record(self, scheduler_stats: Any, iteration_stats: Any, *args: Any, **kwargs: Any) -> None:
            if scheduler_stats is not None:
                counts.add_scheduler(scheduler_stats)
            if iteration_stats is not None:
                counts.add_iteration(iteration_stats)

        def log_engine_initialized(self) -> None:
            pass

    return CountingLogger
