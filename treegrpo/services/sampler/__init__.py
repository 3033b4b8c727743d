"""The sampler: tree policy, prompts, response parsing, model backends, weight receiver.

Public surface (import from here, not from the private modules):
- `render_prompt(mode, task_description, data_overview, parent_code=None, parent_output=None, ...)`
  the exact chat messages the sampler sends; `trim_output`, `task_context`, `data_overview`.
- `parse_completion(text) -> ParsedCompletion(thinking, plan, code)`.
- `build_model(out_dir, size="small", ...)`: a Qwen3-architecture model + local tokenizer (no hub).
- `create_backend(config)`, `Backend`, `Completion`, `SamplingParams`.
- `WeightReceiver`, `push_adapter(address, run_id, version, archive_bytes)`: the gRPC weight path.
- `SamplerConfig`; the service class is `treegrpo.services.sampler.service.SamplerService` (imported lazily).
"""

from treegrpo.services.sampler._adapters import AdapterLoader, LoadResult, VersionGate
from treegrpo.services.sampler._model_builder import SIZES, build_model, train_tokenizer
from treegrpo.services.sampler._parse import ParsedCompletion, parse_completion
from treegrpo.services.sampler._prompts import (
           MODES,
           TaskContext,
           data_overview,
           render_prompt,
           task_context,
           trim_output,
)
from treegrpo.services.sampler._weights import WeightReceiver, push_adapter
from treegrpo.services.sampler.backends import Backend, Completion, SamplingParams, create_backend
from treegrpo.services.sampler.config import SamplerConfig

__all__ = ["MODES", "SIZES", "AdapterLoader", "Backend", "Completion", "LoadResult", "ParsedCompletion",
           "SamplerConfig", "SamplingParams", "TaskContext", "VersionGate", "WeightReceiver", "build_model",
           "create_backend", "data_overview", "parse_completion", "push_adapter", "render_prompt", "task_context",
           "train_tokenizer", "trim_output"]
