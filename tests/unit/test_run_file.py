"""A run file's service sections are typed by the services' own config classes at load.

Imports a private module: `treegrpo.runner._wiring` (what these tests exercise is not on the package's
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
    with pytest.raises(ConfigError, match=r"\[learner\]: field 'optimizer.lr'"):
        load_run_file(write(tmp_path, ""), ["learner.optimizer.lr=0"])


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
    from treegrpo.plugins import config_class, service_class

    assert config_class(name) is service_class(name).config_cls


def test_loading_a_run_file_imports_no_service_and_no_torch(tmp_path):
    import subprocess
    import sys

    f = write(tmp_path, "[learner.optimizer]\nlr = 1e-3\n[sampler.sampling]\ntemperature = 0.7\n")
    code = (
        "import sys\nfrom treegrpo.runner import load_run_file\n"
        f"rf = load_run_file({str(f)!r})\nassert rf.service('learner').optimizer.lr == 1e-3\n"
        "heavy = [m for m in sys.modules if m == 'torch' or m.endswith('.service')]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_runners_replica_count_and_server_list_reach_every_service(tmp_path):
    from treegrpo.runner._wiring import wire

    rf = load_run_file(write(tmp_path, "[runner]\nstream_replicas = 3\n"))
    urls = "nats://127.0.0.1:1,nats://127.0.0.1:2,nats://127.0.0.1:3"
    configs = wire(rf, rf.spec(), urls, 1, tmp_path / "run")
    for name in ("sampler", "executor", "grader", "learner"):
        assert (configs[name].nats.url, configs[name].nats.stream_replicas) == (urls, 3)


def test_the_wiring_goes_under_the_files_settings_and_the_written_toml_is_the_typed_config(tmp_path):
    from treegrpo.config import load
    from treegrpo.plugins import config_class
    from treegrpo.runner._wiring import wire, write_configs

    text = (
        '[sampler.grpc]\nport = 7000\n[learner]\nmodel = "/m/learner"\n'
        '[learner.optimizer]\nlr = 3e-3\n[executor.nats]\nurl = "nats://elsewhere:4222"\n'
    )
    rf = load_run_file(write(tmp_path, text))
    spec = rf.spec().model_copy(update={"run_id": "w1"})
    configs = wire(rf, spec, "nats://127.0.0.1:9", 5555, tmp_path / "run")
    sampler, learner, executor = configs["sampler"], configs["learner"], configs["executor"]
    assert (sampler.grpc.port, sampler.grpc.host) == (7000, "127.0.0.1")  # the file's port wins
    assert learner.publish.sampler_endpoints == ["127.0.0.1:5555"] and learner.model == "/m/learner"
    assert (executor.nats.url, executor.nats.stream_replicas) == ("nats://elsewhere:4222", 1)
    assert all(c.run_id == "w1" for c in configs.values())
    paths = write_configs(configs, tmp_path / "run")
    for name, path in paths.items():
        read = load(config_class(name), path)  # as the service reads it
        assert read == load(config_class(name), None, configs[name].model_dump(exclude_unset=True))
    assert load(config_class("learner"), paths["learner"]).optimizer.lr == 3e-3
    assert "max_concurrent_groups" not in paths["sampler"].read_text()  # only what is set is written


def test_an_old_flat_learner_key_is_refused_naming_its_new_place(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"\[learner\]: .*learner\.lr is now learner\.optimizer\.lr"):
        load_run_file(write(tmp_path, "[learner]\nlr = 3e-3\n"))
    with pytest.raises(ConfigError, match=r"learner\.keep_checkpoints is now learner\.checkpoint\.keep"):
        load_run_file(write(tmp_path, ""), ["learner.keep_checkpoints=1"])
    monkeypatch.setenv("TREEGRPO_LEARNER_MICRO_BATCH_TOKENS", "4096")  # an old variable is not ignored
    with pytest.raises(ConfigError, match=r"learner\.micro_batch_tokens is now learner\.packing\."):
        load_run_file(write(tmp_path, ""))
