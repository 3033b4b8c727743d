"""SamplerConfig: which model backend, how to sample, how prompts look, where weights arrive."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from treegrpo.config import HealthSettings, NatsSettings, Section, Settings, TelemetrySettings
from treegrpo.prompts import PromptSettings

# the vllm/openai sections are the backends' own settings models, so every field is configurable
from treegrpo.services.sampler.backends._openai import OpenAISettings
from treegrpo.services.sampler.backends._vllm import VllmSettings


class HfSettings(Section):
    device: str = Field(default="cpu", description="torch device for the hf backend (cpu, cuda, cuda:1)")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(default="float32", description="Weights dtype; float32 on CPU")
    torch_threads: int = Field(default=0, ge=0, description="torch intra-op threads; 0 keeps torch's default")


class SamplingSettings(Section):
    max_new_tokens: int = Field(default=2048, ge=1, description="Response token budget per node")
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature (logprobs are recorded from the raw, temperature-1 distribution)")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass")


class GrpcSettings(Section):
    host: str = Field(default="127.0.0.1", description="Interface the weight receiver binds (loopback unless deployed apart)")
    port: int = Field(default=50151, ge=0, le=65535, description="Port of the weight receiver; 0 = a free port")
    address_file: str = Field(default="", description="Write the bound host:port here for the learner; empty = $TREEGRPO_HOME/sampler/<instance>.grpc")
    max_adapter_bytes: int = Field(default=4 << 30, ge=1, description="Refuse pushes announcing more than this")
    pull_after_s: float = Field(default=15.0, ge=0, description="Pull a published version from the object store if no push brought it within this long")
    published_wait_s: float = Field(default=10.0, ge=0, description="How long a push waits for its policy.published announcement before refusing")


class ReplaySettings(Section):
    source_dir: str = Field(default="", description="Folder of completions served instead of sampling: *.py files (wrapped in a python fence) or *.txt/*.md raw completions, chosen by the seeded RNG")
    delay_s: float = Field(default=0.0, ge=0, description="Sleep this long per group: a controllable generation time (pipeline and overlap tests)")


class SamplerConfig(Settings):
    """The sampler service: the agent that grows every task's tree and samples its nodes."""

    model_config = SettingsConfigDict(env_prefix="TREEGRPO_SAMPLER_", extra="forbid", env_nested_delimiter="__")

    backend: Literal["hf", "vllm", "openai", "replay"] = Field(default="hf", description="Model backend (replay: fixed completions scored under the hf model, for load and overlap tests)")
    model: str = Field(default="", description="Base model folder; empty = $TREEGRPO_HOME/models/small (built by `treegrpo model init`)")
    hf: HfSettings = Field(default_factory=HfSettings, description="hf backend settings")
    vllm: VllmSettings = Field(default_factory=VllmSettings, description="vllm backend settings")
    openai: OpenAISettings = Field(default_factory=OpenAISettings, description="openai backend settings")
    replay: ReplaySettings = Field(default_factory=ReplaySettings, description="replay backend settings")
    sampling: SamplingSettings = Field(default_factory=SamplingSettings, description="Sampling parameters")
    prompts: PromptSettings = Field(default_factory=PromptSettings, description="Prompt switches")
    grpc: GrpcSettings = Field(default_factory=GrpcSettings, description="Weight receiver (learner pushes adapters here)")
    max_concurrent_groups: int = Field(default=1, ge=1, description="Sibling groups generated at once (1 on a CPU; more for vllm/openai)")
    publish_run_completed: bool = Field(default=True, description="Publish run.completed when every task's last round is complete")
    workdir: str = Field(default="", description="Where pushed adapters are unpacked; empty = $TREEGRPO_HOME/sampler")
    run_id: str = Field(default="", description="Serve only this run (its own durable consumer, filtered to its subjects); empty = every run")
    nats: NatsSettings = Field(default_factory=NatsSettings, description="Where the bus is")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings, description="Traces")
    health: HealthSettings = Field(default_factory=HealthSettings, description="Heartbeat file for the probes")
