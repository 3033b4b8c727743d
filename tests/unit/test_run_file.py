"""A run file's service sections are typed by the services' own config classes at load.

Imports a private module: `treegrpo.runner._execute` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import pytest

from treegrpo.config import ConfigError
from treegrpo.runner import load_run_file
from treegrpo_executor.config import ExecutorConfig
from treegrpo_sampler.config import SamplerConfig


def write(tmp_path, text: str):
    f = tmp_path / "run.toml"
    f.write_text('[run]\ntasks = ["spooky-mini"]\n' + text)
    return f


def test_a_misspelt_key_in_a_service_section_is_rejected_at_load_naming_section_and_field(tmp_path):
    f = write(tmp_path, "[sampler.sampling]\ntemprature = 0.8\n")
    with pytest.raises(ConfigError, match=r"run\.toml: \[sampler\]: field 'sampling\.temprature': Extra"):
        load_run_file(f)


def test_a_bad_value_in_a_section_or_in_an_override_is_rejected_at_load(tmp_path):
    f = write(tmp_path, "[executor]\ntimeout_s = -1\n")
    with pytest.raises(ConfigError, match=r"\[executor\]: field 'timeout_s': Input should be greater than 0"):
        load_run_file(f)
    with pytest.raises(ConfigError, match=r"\[learner\]: field 'lr'"):
        load_run_file(write(tmp_path, ""), ["learner.lr=0"])


def test_a_section_is_typed_and_stays_partial_without_the_runners_environment(tmp_path, monkeypatch):
    # the environment is the service's to apply, in its own process, above the file
    monkeypatch.setenv("TREEGRPO_SAMPLER_MAX_CONCURRENT_GROUPS", "7")
    text = (
        '[sampler]\nbackend = "replay"\n[sampler.sampling]\ntemperature = 0.6\n'
        "[executor]\nmax_concurrency = 2\n"
    )
    rf = load_run_file(write(tmp_path, text))
    sampler = rf.service("sampler")
    assert isinstance(sampler, SamplerConfig) and isinstance(rf.service("executor"), ExecutorConfig)
    assert sampler.backend == "replay" and sampler.sampling.temperature == 0.6
    assert sampler.model_fields_set == {"backend", "sampling"} and sampler.max_concurrent_groups == 1
    assert rf.section("sampler") == {"backend": "replay", "sampling": {"temperature": 0.6}}
    assert rf.service("grader").model_fields_set == set()


@pytest.mark.parametrize("key", ["nats.url", "telemetry.enabled"])
def test_the_run_table_no_longer_takes_the_bus_or_traces(tmp_path, key):
    # each service's own settings (ServiceSettings) say where the bus is; the RunSpec never did
    with pytest.raises(ConfigError, match=rf"run\.toml: \[run\]: field '{key.split('.')[0]}': Extra inputs"):
        load_run_file(write(tmp_path, ""), [f"run.{key}=true"])


def test_an_unknown_table_is_rejected_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"run\.toml: field 'samplr': Extra inputs are not permitted$"):
        load_run_file(write(tmp_path, '[samplr]\nbackend = "hf"\n'))


@pytest.mark.parametrize("name", ["sampler", "executor", "grader", "learner"])
def test_the_config_registry_names_each_services_own_config_class(name):
    from treegrpo.registry import config_class, service_class

    assert config_class(name) is service_class(name).config_cls


def test_loading_a_run_file_imports_no_service_and_no_torch(tmp_path):
    import subprocess
    import sys

    f = write(tmp_path, "[learner]\nlr = 1e-3\n[sampler.sampling]\ntemperature = 0.7\n")
    code = (
        "import sys\nfrom treegrpo.runner import load_run_file\n"
        f"rf = load_run_file({str(f)!r})\nassert rf.service('learner').lr == 1e-3\n"
        "heavy = [m for m in sys.modules if m == 'torch' or m.endswith('.service')]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_runners_replica_count_and_server_list_reach_every_service(tmp_path):
    from treegrpo.runner._execute import service_sections

    rf = load_run_file(write(tmp_path, "[runner]\nstream_replicas = 3\n"))
    urls = "nats://127.0.0.1:1,nats://127.0.0.1:2,nats://127.0.0.1:3"
    sections = service_sections(rf, rf.spec(), urls, 1, tmp_path / "run")
    for name in ("sampler", "executor", "grader", "learner"):
        assert sections[name]["nats"] == {"url": urls, "stream_replicas": 3}
