"""The sampler: tree policy, response parsing, model backends, weight receiver. The prompts it
serves are `treegrpo.prompts`; the local model it samples is built by `treegrpo.models`.

Public surface (import from here, not from the private modules):
- `parse_completion(text) -> ParsedCompletion(thinking, plan, code)`.
- `create_backend(config)`, `Backend`, `Completion`, `SamplingParams`.
- `WeightReceiver`, `push_adapter(address, run_id, version, archive_bytes)`: the gRPC weight path.
- `SamplerConfig`; the service class is `treegrpo_sampler.service.SamplerService` (imported lazily).
"""

from treegrpo_sampler._adapters import AdapterLoader
from treegrpo_sampler._gate import LoadResult, VersionGate
from treegrpo_sampler._parse import ParsedCompletion, parse_completion
from treegrpo_sampler._weights import WeightReceiver, push_adapter
from treegrpo_sampler.backends import Backend, Completion, SamplingParams, create_backend
from treegrpo_sampler.config import SamplerConfig

__all__ = [
    "AdapterLoader",
    "Backend",
    "Completion",
    "LoadResult",
    "ParsedCompletion",
    "SamplerConfig",
    "SamplingParams",
    "VersionGate",
    "WeightReceiver",
    "create_backend",
    "parse_completion",
    "push_adapter",
]
