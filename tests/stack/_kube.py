"""The dev overlay's rendered manifests, made playable by podman 4.3's `kube play` (not a test module).

`kube play` of podman 4.3 (Debian bookworm's) plays Pods, Deployments, PersistentVolumeClaims and
ConfigMaps. What it lacks of a kubelet, and what `playable()` does in its place, each kept to the
least that lets the manifests' own images, commands, env, config mounts and probes run:
- StatefulSet: not a kind it plays. NATS's pod template becomes a Pod named as its Service
  (`nats`, which is what the services dial), its volumeClaimTemplate an emptyDir, and its image the
  local build of nats (deploy/docker/nats.Dockerfile; nats:2.15.1-alpine is on no reachable registry);
- Secret: it stores the object as YAML and then fails to read it back as JSON ("is not valid JSON");
  a podman secret holding the JSON key/value map it expects is made instead;
- `$(VAR)` in env values (the NATS URLs hold `$(NATS_PASSWORD)`): not expanded; expanded here
  from the container's own earlier env entries, as the kubelet does;
- fsGroup: not applied to emptyDir volumes (NATS cannot create /data/jetstream); each emptyDir
  volume is given the pod's fsGroup here, group-writable and setgid, as the kubelet does;
- probes: turned into healthchecks that cannot work (`CMD-SHELL` with the command split into
  arguments, `curl` for httpGet on a named port resolved to 0), and readiness/startup probes are
  dropped; the test runs each readinessProbe itself (`podman exec`, as the kubelet runs exec probes);
- emptyDir: a named volume of the emptyDir's name, shared by every pod that uses the same name (the
  four services' `home` would be one folder, their heartbeats mixed); each pod's emptyDirs are
  renamed `<pod>-<volume>` here, private to the pod as on Kubernetes.
Dropped: Namespaces, Services, NetworkPolicies, RBAC, quotas, PodDisruptionBudgets (nothing in
podman implements them), and the otel-collector and jaeger Deployments (their images are on no
registry reachable here).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import yaml

from tests.stack._stack import SERVICES

PLAYED = ("ConfigMap", "PersistentVolumeClaim")
NATS_IMAGE = "localhost/treegrpo/nats:2.15.1"
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def render(kubectl: str, overlay: Path) -> list[dict]:
    out = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _expand_env(container: dict, secrets: dict[str, dict[str, str]]) -> None:
    """$(VAR) references to earlier entries, the kubelet's dependent environment variables."""
    seen: dict[str, str] = {}
    for entry in container.get("env", []):
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref is not None:
            seen[entry["name"]] = base64.b64decode(secrets[ref["name"]][ref["key"]]).decode()
        elif "value" in entry:
            entry["value"] = _REF.sub(lambda m: seen.get(m.group(1), m.group(0)), entry["value"])
            seen[entry["name"]] = entry["value"]


def _statefulset_as_pod(sts: dict) -> dict:
    template = sts["spec"]["template"]
    spec = template["spec"]
    for container in spec["containers"]:
        container["image"] = NATS_IMAGE
    spec.setdefault("volumes", [])
    spec["volumes"] += [
        {"name": v["metadata"]["name"], "emptyDir": {}} for v in sts["spec"].get("volumeClaimTemplates", [])
    ]
    meta = {
        "name": sts["metadata"]["name"],
        "namespace": sts["metadata"]["namespace"],
        "labels": template["metadata"]["labels"],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _private_empty_dirs(spec: dict, pod: str) -> None:
    renamed = {}
    for vol in spec.get("volumes", []):
        if "emptyDir" in vol:
            renamed[vol["name"]] = vol["name"] = f"{pod}-{vol['name']}"
    for container in spec.get("containers", []):
        for mount in container.get("volumeMounts", []):
            mount["name"] = renamed.get(mount["name"], mount["name"])


def playable(docs: list[dict]) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """(the documents to play, the Secrets' data by name)."""
    secrets = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "Secret"}
    play = [d for d in docs if d["kind"] in PLAYED]
    play += [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] in SERVICES]
    play += [
        _statefulset_as_pod(d) for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "nats"
    ]
    for doc in play:
        spec = doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else doc.get("spec", {})
        for container in spec.get("containers", []):
            _expand_env(container, secrets)
        if doc["kind"] in ("Deployment", "Pod"):
            _private_empty_dirs(spec, doc["metadata"]["name"])
    return play, secrets


def pod_specs(play: list[dict]) -> dict[str, dict]:
    """Pod name (as podman names them: <deployment>-pod-0, or the Pod's) -> its pod spec."""
    out = {}
    for doc in play:
        if doc["kind"] == "Deployment":
            out[f"{doc['metadata']['name']}-pod-0"] = doc["spec"]["template"]["spec"]
        elif doc["kind"] == "Pod":
            out[doc["metadata"]["name"]] = doc["spec"]
    return out


def podman_secret(name: str, data: dict[str, str], scratch: Path) -> None:
    path = scratch / f"{name}.json"
    path.write_text(json.dumps(data))
    subprocess.run(["podman", "secret", "create", name, str(path)], check=True, capture_output=True)
