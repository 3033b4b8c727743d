"""The sampler service with the vllm backend on a CUDA GPU (run on the device machine:
`python3 -m pytest -m gpu tests/gpu/test_sampler_vllm_gpu.py`, vLLM staged by scripts/gpu_vllm.sh).

A real nats-server, the real SamplerService, vLLM in bf16 with CUDA: a two-round synchronous run
whose second round must wait for v1, which the service pulls from the object store. v1 is an
adapter that forces one token, so every node of round 2 must be made of it (no stale adapter),
and its behaviour logprobs must match transformers + peft under that adapter.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import os
import tarfile

import pytest
import torch

from tests.integration.test_sampler_service import begin, grading, wait_for
from tests.integration.test_sampler_vllm_helpers import (
    build_biased_adapter,
    build_sharp_model,
    reference_logprobs,
)
from treegrpo import events
from treegrpo.bus import ADAPTERS
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler import SamplerConfig
from treegrpo_sampler.service import SamplerService

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/gpu_vllm.sh)"),
]

TOKEN = 100
# vLLM forks its engine process unless CUDA is already initialised here; on the H200 (2026-12-01) the
# forked engine died with "Cannot re-initialize CUDA in forked subprocess". Spawn always works.
os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")


async def publish(bus, run: str, version: int, folder) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f.name)
    key = f"{run}/v{version}.tar"
    sha, size = await bus.put_object(ADAPTERS, key, buf.getvalue())
    body = pb.PolicyPublished(version=version, adapter_key=key, sha256=sha, bytes=size, step=version)
    await bus.publish(events.make_event(run, "learner/test", body))


def share(node: pb.NodeSampled, token: int) -> float:
    ids = list(node.response_token_ids)
    return sum(t == token for t in ids) / len(ids)


@pytest.mark.timeout(600)
async def test_vllm_sampler_on_cuda_serves_the_pulled_version_from_the_next_round(bus, nats_server, tmp_path):
    model = build_sharp_model(tmp_path / "model")
    adapter = build_biased_adapter(model, tmp_path / "adapter", TOKEN)
    task = tmp_path / "public" / "spooky-mini"
    task.mkdir(parents=True)
    (task / "description.md").write_text("# Spooky mini\nPredict the author of each sentence. Log loss.")
    cfg = SamplerConfig(
        backend="vllm",
        model=str(model),
        nats={"url": nats_server.url},
        workdir=str(tmp_path / "sampler"),
        vllm={
            "dtype": "bfloat16",
            "max_model_len": 1024,
            "gpu_memory_utilization": 0.2,
            "max_lora_rank": 8,
            "enforce_eager": True,
        },
        prompts={"task_roots": [str(tmp_path / "public")]},
        sampling={"max_new_tokens": 12},
        grpc={"port": 0, "pull_after_s": 0.3},
        max_concurrent_groups=2,
    )
    svc = SamplerService(cfg, "s1")
    await svc.setup()
    runner = asyncio.create_task(svc.run())
    try:
        async with grading(bus):
            await begin(
                bus,
                run_id="gpu1",
                tasks=["spooky-mini"],
                rounds=2,
                train=True,
                max_staleness=0,
                tree={"expansions": 2, "group_size": 4, "drafts": 2},
            )
            await wait_for(bus, "gpu1", Kind.ROUND_COMPLETED, ("spooky-mini", "1"), timeout=300)
            await publish(bus, "gpu1", 1, adapter)
            await wait_for(bus, "gpu1", Kind.RUN_COMPLETED, timeout=120)
    finally:
        await svc.stop()
        await runner
        await svc.close()
    assert (await bus.last_event("gpu1", Kind.POLICY_LOADED, ("1", "s1"))) is not None
    first_id = events.node_id("gpu1", "spooky-mini", 1, 0, 0)
    first = (await bus.last_event("gpu1", Kind.NODE_SAMPLED, first_id)).node_sampled
    assert first.policy_version == 0 and share(first, TOKEN) < 0.2
    for step in range(2):
        for i in range(4):
            node = (
                await bus.last_event(
                    "gpu1", Kind.NODE_SAMPLED, events.node_id("gpu1", "spooky-mini", 2, step, i)
                )
            ).node_sampled
            assert node.policy_version == 1 and share(node, TOKEN) > 0.9, (step, i)
    ref = reference_logprobs(model, adapter, list(node.prompt_token_ids), list(node.response_token_ids))
    got = list(node.response_logprobs)
    assert sum(abs(a - b) for a, b in zip(got, ref, strict=True)) / len(ref) < 0.05
