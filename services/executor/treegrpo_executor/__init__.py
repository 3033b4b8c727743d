"""Executor service: resource gate, sandbox backends (local, k8s), GPU-idle guard.

The service itself lives in `treegrpo_executor.service` (imported by `treegrpo serve executor`);
this package exposes the parts other code and tests use.
"""

from treegrpo_executor._gate import MALFORMED, Declaration, parse_declaration
from treegrpo_executor._gpu import GpuPool, GpuReader, IdlePolicy, NvmlReader, TraceReader, watch
from treegrpo_executor._host import SandboxError
from treegrpo_executor._local import LocalBackend
from treegrpo_executor._outcome import (
    CRASHED,
    NO_CODE,
    NO_SUBMISSION,
    OK,
    TIMEOUT,
    Job,
    Limits,
    Outcome,
    Timings,
    exc_type_from_output,
    tail,
)
from treegrpo_executor.config import ExecutorConfig

__all__ = [
    "CRASHED",
    "MALFORMED",
    "NO_CODE",
    "NO_SUBMISSION",
    "OK",
    "TIMEOUT",
    "Declaration",
    "ExecutorConfig",
    "GpuPool",
    "GpuReader",
    "IdlePolicy",
    "Job",
    "Limits",
    "LocalBackend",
    "NvmlReader",
    "Outcome",
    "SandboxError",
    "Timings",
    "TraceReader",
    "exc_type_from_output",
    "parse_declaration",
    "tail",
    "watch",
]
