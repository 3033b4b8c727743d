"""SamplerConfig: which model backend, how to sample, how prompts look, where weights arrive."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from treegrpo.config import Section, ServiceSettings
from treegrpo.prompts import PromptSettings


class HfSettings(Section):
    device: str = Field(default="cpu", description="torch device for the hf backend (cpu, cuda, cuda:1)")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32", description="Weights dtype; float32 on CPU"
    )
    torch_threads: int = Field(default=0, ge=0, description="torch intra-op threads; 0 keeps torch's default")


class VllmSettings(Section):
    """Settings of the in-process vLLM engine."""

    tokenizer: str = Field(default="", description="Tokenizer folder; empty = the model folder")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="Weights dtype (auto = the checkpoint's; vLLM's CPU backend casts float16 to bfloat16)",
    )
    max_model_len: int = Field(
        default=16384, ge=64, description="Context length vLLM reserves KV cache for (prompt + response)"
    )
    gpu_memory_utilization: float = Field(
        default=0.85, gt=0, le=1, description="vLLM's share of GPU memory (GPU only)"
    )
    cpu_kvcache_gib: int = Field(
        default=4, ge=1, description="KV cache size on the CPU backend (sets VLLM_CPU_KVCACHE_SPACE)"
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="GPUs per engine")
    enforce_eager: bool = Field(
        default=False, description="Skip CUDA graphs / torch.compile (faster start, slower decode)"
    )
    max_num_seqs: int = Field(default=256, ge=1, description="Sequences decoded together in one engine step")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        default="auto",
        description="KV cache dtype (auto = the weights'); fp8 halves the KV bytes every decode step "
        "reads, the larger term at the seed's shape (docs/PERFORMANCE.md, 'vLLM on one H200'); GPU only",
    )
    enable_prefix_caching: bool = Field(
        default=True, description="Share KV blocks of common prompt prefixes (the G siblings of a group)"
    )
    max_lora_rank: int = Field(
        default=64,
        ge=1,
        description="Largest LoRA rank vLLM accepts (one of 8, 16, 32, 64, 128, 256, 320, 512)",
    )
    max_loras: int = Field(
        default=2, ge=1, description="Adapters in one batch: the new version and the one still finishing"
    )
    max_cpu_loras: int = Field(default=4, ge=1, description="Adapters vLLM keeps loaded in host memory")
    lora_name_prefix: str = Field(
        default="policy", description="LoRA names are <prefix>-v<version>-<id>, unique per load"
    )
    seed: int = Field(default=0, description="Engine seed (per-request seeds come from SamplingParams.seed)")
    language_model_only: bool = Field(
        default=False,
        description="Load only the text model of a multimodal wrapper (Qwen3.5's ConditionalGeneration)",
    )
    gdn_prefill_backend: Literal["", "triton", "flashinfer"] = Field(
        default="",
        description=(
            "Qwen3.5 gated-delta-net prefill kernels; 'triton' when FlashInfer is not installed "
            "('' = vLLM's choice)"
        ),
    )
    mamba_ssm_cache_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description=(
            "dtype of the Gated DeltaNet (Qwen3.5/3.6) recurrent state; kv_cache_dtype covers only the "
            "full-attention layers of these hybrid models (auto = the weights')"
        ),
    )
    sleep_when_idle: bool = Field(
        default=False,
        description=(
            "Colocated with the learner on one GPU: put the engine to sleep (vLLM sleep mode) while "
            "the sampler waits for the next policy version, so the learner's step has the memory; "
            "woken before the next adapter loads (docs/VLLM.md, 'Sharing one GPU with the learner')"
        ),
    )
    sleep_level: Literal[1, 2] = Field(
        default=1,
        description=(
            "1: weights copied to host memory and the KV cache dropped (fast wake); "
            "2: weights dropped too (wake re-reads them from the model folder)"
        ),
    )


class OpenAISettings(Section):
    """How to reach and drive an OpenAI-compatible server."""

    base_url: str = Field(
        default="http://127.0.0.1:8000/v1", description="Server root or its /v1 root (vllm serve, SGLang)"
    )
    api_key: str = Field(default="EMPTY", description="Bearer token sent to the server")
    served_model: str = Field(
        default="",
        description="Base model name on the server; empty = the first base model of GET /v1/models",
    )
    timeout_s: float = Field(default=600.0, gt=0, description="HTTP timeout of one generation request")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Timeout to open a connection")
    max_connections: int = Field(
        default=64, ge=1, description="Concurrent HTTP connections (groups in flight)"
    )
    retries: int = Field(
        default=3, ge=0, description="Retries of a request that failed to connect or got 408/429/5xx"
    )
    retry_backoff_s: float = Field(default=1.0, ge=0, description="First retry delay; doubles each retry")
    token_ids: Literal["required", "optional"] = Field(
        default="required",
        description=(
            "required: fail if the server cannot give token ids/logprobs (training); "
            "optional: probe-only servers"
        ),
    )
    top_k: int | None = Field(
        default=-1,
        description=(
            "top_k sent with each request (-1 = off, overriding checkpoint defaults); "
            "None = not sent, for strict-OpenAI servers"
        ),
    )
    lora_name_prefix: str = Field(
        default="policy",
        description="Adapter names are <prefix>-v<version>-<instance>-<n>, new for every load",
    )
    server_adapter_root: str = Field(
        default="",
        description=(
            "Folder under which the SERVER sees adapter folders (shared volume); "
            "empty = the sampler's own path"
        ),
    )


class SamplingSettings(Section):
    max_new_tokens: int = Field(default=2048, ge=1, description="Response token budget per node")
    temperature: float = Field(
        default=1.0,
        gt=0,
        description="Sampling temperature (logprobs are recorded from the raw, temperature-1 distribution)",
    )
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass")


class GrpcSettings(Section):
    host: str = Field(
        default="127.0.0.1",
        description="Interface the weight receiver binds (loopback unless deployed apart)",
    )
    port: int = Field(
        default=50151, ge=0, le=65535, description="Port of the weight receiver; 0 = a free port"
    )
    address_file: str = Field(
        default="",
        description=(
            "Write the bound host:port here for the learner; empty = $TREEGRPO_HOME/sampler/<instance>.grpc"
        ),
    )
    max_adapter_bytes: int = Field(
        default=4 << 30, ge=1, description="Refuse pushes announcing more than this"
    )
    pull_after_s: float = Field(
        default=15.0,
        ge=0,
        description="Pull a published version from the object store if no push brought it within this long",
    )
    published_wait_s: float = Field(
        default=10.0,
        ge=0,
        description="How long a push waits for its policy.published announcement before refusing",
    )


class ReplaySettings(Section):
    source_dir: str = Field(
        default="",
        description=(
            "Folder of completions served instead of sampling: *.py files "
            "(wrapped in a python fence) or *.txt/*.md raw completions, chosen by the seeded RNG"
        ),
    )
    delay_s: float = Field(
        default=0.0,
        ge=0,
        description="Sleep this long per group: a controllable generation time (pipeline and overlap tests)",
    )


class SamplerConfig(ServiceSettings):
    """The sampler service: the agent that grows every task's tree and samples its nodes."""

    model_config = SettingsConfigDict(
        env_prefix="TREEGRPO_SAMPLER_", extra="forbid", env_nested_delimiter="__"
    )

    backend: Literal["hf", "vllm", "openai", "replay"] = Field(
        default="hf",
        description=(
            "Model backend (replay: fixed completions scored under the hf model, for load and overlap tests)"
        ),
    )
    model: str = Field(
        default="",
        description="Base model folder; empty = $TREEGRPO_HOME/models/small (built by `treegrpo model init`)",
    )
    hf: HfSettings = Field(default_factory=HfSettings, description="hf backend settings")
    vllm: VllmSettings = Field(default_factory=VllmSettings, description="vllm backend settings")
    openai: OpenAISettings = Field(default_factory=OpenAISettings, description="openai backend settings")
    replay: ReplaySettings = Field(default_factory=ReplaySettings, description="replay backend settings")
    sampling: SamplingSettings = Field(default_factory=SamplingSettings, description="Sampling parameters")
    prompts: PromptSettings = Field(default_factory=PromptSettings, description="Prompt switches")
    grpc: GrpcSettings = Field(
        default_factory=GrpcSettings, description="Weight receiver (learner pushes adapters here)"
    )
    max_concurrent_groups: int = Field(
        default=1, ge=1, description="Sibling groups generated at once (1 on a CPU; more for vllm/openai)"
    )
    publish_run_completed: bool = Field(
        default=True, description="Publish run.completed when every task's last round is complete"
    )
    workdir: str = Field(
        default="", description="Where pushed adapters are unpacked; empty = $TREEGRPO_HOME/sampler"
    )
