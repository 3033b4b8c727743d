"""`podman kube play` of the rendered dev overlay (deploy/k8s/overlays/dev) as a smoke test of the
manifests: their images, commands, env (the NATS URLs from the Secret), ConfigMap mounts, security
contexts and readiness probes, with NATS and the services in pods on a network of their own. What
podman 4.3 lacks of a kubelet is done in tests/stack/_kube.py, each item named there; the executor
(backend k8s) needs a Kubernetes API, which kube play has none of: its pod must fail saying so."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.stack._kube import SERVICES, playable, pod_specs, podman_secret, render
from tests.stack.conftest import tiny_model

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
UP = ("grader", "sampler", "learner")  # the services that can be ready without a Kubernetes API


def podman(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check, timeout=timeout)


def volume(name: str) -> Path:
    return Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}", name).stdout.strip())


def ready(container: str, probe: dict) -> bool:
    """The container's readinessProbe, run as the kubelet runs it (exec; httpGet from inside)."""
    if "exec" in probe:
        argv = probe["exec"]["command"]
    else:
        argv = ["wget", "-q", "-O", "/dev/null", f"http://127.0.0.1:8222{probe['httpGet']['path']}"]
    return podman("exec", container, *argv, check=False, timeout=60).returncode == 0


def fill_volumes(scratch: Path) -> None:
    """What docs/DEPLOY.md says to put on the claims before a run."""
    from treegrpo.tasks import ensure_builtin_tasks

    tiny = tiny_model(scratch / "models" / "tiny")
    shutil.copytree(tiny, volume("treegrpo-models") / "tiny", dirs_exist_ok=True)
    ensure_builtin_tasks(scratch / "data")
    shutil.copytree(scratch / "data" / "tasks", volume("treegrpo-tasks") / "tasks", dirs_exist_ok=True)
    shutil.copytree(scratch / "data" / "tasks" / "public", volume("treegrpo-public-data"), dirs_exist_ok=True)
    for claim in ("treegrpo-models", "treegrpo-tasks", "treegrpo-public-data"):
        subprocess.run(["chown", "-R", "10001:10001", str(volume(claim))], check=True)


def fs_groups(specs: dict[str, dict]) -> None:
    """The pod's fsGroup on its emptyDir volumes, group-writable and setgid, as the kubelet sets it
    before a start. podman copies the image's folder (and its owner) into a fresh volume at the
    first start, so this runs after that start; what failed for want of it is started again."""
    for spec in specs.values():
        group = spec.get("securityContext", {}).get("fsGroup")
        for vol in spec.get("volumes", []):
            if "emptyDir" in vol and group is not None:
                path = volume(vol["name"])
                os.chown(path, -1, group)
                path.chmod(0o2775)


def test_kube_play_of_the_dev_overlay_starts_nats_and_the_services_to_ready(tmp_path):
    kubectl = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or "kubectl"
    play, secret_data = playable(render(kubectl, ROOT / "deploy/k8s/overlays/dev"))
    specs = pod_specs(play)
    manifest = tmp_path / "play.yaml"
    manifest.write_text(yaml.safe_dump_all(play))
    network = f"tgkube{secrets.token_hex(3)}"
    for name in SERVICES:  # the overlay's tags, on the images scripts/stack_images.py built
        podman("tag", f"localhost/treegrpo/{name}:0.1.0", f"localhost/treegrpo/{name}:dev")
    podman("network", "create", network)
    try:
        for name, data in secret_data.items():
            podman_secret(name, data, tmp_path)
        played = podman("kube", "play", "--start=false", "--network", network, str(manifest), check=False)
        assert played.returncode == 0, played.stderr
        fill_volumes(tmp_path)
        for pod in specs:
            podman("pod", "start", pod)
        fs_groups(specs)
        nats_probe = specs["nats"]["containers"][0]["readinessProbe"]
        wait_ready("nats-nats", nats_probe, 120)
        for name in UP:
            container, spec = f"{name}-pod-0-{name}", specs[f"{name}-pod-0"]
            wait_ready(container, spec["containers"][0]["readinessProbe"], 300)
            check_container(container, spec)
        said = executor_says(120)  # its k8s backend finds no in-cluster config, no API
        assert "Invalid kube-config file" in said, said[-3000:]
    finally:
        podman("kube", "down", str(manifest), check=False)
        for name in secret_data:
            podman("secret", "rm", name, check=False)
        for spec in specs.values():  # kube down leaves the volumes; podman names them as below
            for vol in spec.get("volumes", []):
                claim = vol.get("persistentVolumeClaim", {}).get("claimName")
                config = vol.get("configMap", {}).get("name")
                podman("volume", "rm", "-f", claim or config or vol["name"], check=False)
        for doc in play:
            if doc["kind"] == "PersistentVolumeClaim":
                podman("volume", "rm", "-f", doc["metadata"]["name"], check=False)
        podman("network", "rm", "-f", network, check=False)
        for name in SERVICES:
            podman("rmi", f"localhost/treegrpo/{name}:dev", check=False)


def wait_ready(container: str, probe: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready(container, probe):
        if podman("inspect", "--format", "{{.State.Status}}", container).stdout.strip() == "exited":
            podman("start", container, check=False)  # what the pod's restartPolicy Always does in time
        if time.monotonic() > deadline:
            logs = podman("logs", "--tail", "40", container, check=False)
            raise AssertionError(f"{container} not ready in {timeout}s:\n{logs.stdout}{logs.stderr}")
        time.sleep(3)


def check_container(container: str, spec: dict) -> None:
    """The manifest's command, config mount and security context, as podman runs them."""
    info = yaml.safe_load(podman("inspect", container).stdout)[0]
    manifest = spec["containers"][0]
    assert info["Config"]["Cmd"][-len(manifest["args"]) :] == manifest["args"], info["Config"]["Cmd"]
    assert info["HostConfig"]["ReadonlyRootfs"] is True
    assert not info.get("EffectiveCaps"), info.get("EffectiveCaps")
    assert podman("exec", container, "id", "-u").stdout.strip() == str(spec["securityContext"]["runAsUser"])
    config = [a for a in manifest["args"] if a.startswith("/etc/treegrpo/")]
    if config:
        assert podman("exec", container, "test", "-s", config[0], check=False).returncode == 0, config


def executor_says(timeout: float) -> str:
    """The executor pod's output once its backend gave up (it may still be starting when the others
    are ready), or all it said by the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        out = podman("logs", "executor-pod-0-executor", check=False)
        said = out.stdout + out.stderr
        if "Invalid kube-config file" in said or time.monotonic() > deadline:
            return said
        time.sleep(2)
