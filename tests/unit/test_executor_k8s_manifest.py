"""The k8s backend's objects, validated offline against the Kubernetes schema (kubernetes-validate).

Imports a private module: `treegrpo_executor._k8s`, `treegrpo_executor._k8s_manifest` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import base64
import re
import zlib

import kubernetes_validate
import pytest
from kubernetes import client as k8s

from treegrpo_executor import ExecutorConfig, Job, Limits, parse_declaration
from treegrpo_executor._k8s import parse_log
from treegrpo_executor._k8s_manifest import EXIT_MARK, SUB_MARK, config_map, pod, pod_name

VERSION = "1.37.0"
GPU_CODE = (
    "# /// script\n# [tool.resources]\n# cpu = 8\n# mem = 16\n# ephemeral = 4\n# gpu = 1\n# ///\n"
    "import torch\n"
)


def as_dict(obj) -> dict:
    return k8s.ApiClient().sanitize_for_serialization(obj)


def job_for(code: str, cfg: ExecutorConfig) -> Job:
    return Job(
        "20260702_152844",
        "db91761a87bf",
        "aerial-cactus-identification",
        code,
        Limits.for_node(parse_declaration(code, cfg.gate), cfg),
    )


@pytest.mark.parametrize("code", ["print(1)\n", GPU_CODE])
@pytest.mark.parametrize("claim", ["", "mlebench-public"])
def test_pod_and_configmap_validate_strictly_against_the_kubernetes_schema(code, claim):
    cfg = ExecutorConfig(
        backend="k8s", caps={"cpu": 16}, k8s={"data_claim": claim, "runtime_class": "gvisor"}
    )
    job = job_for(code, cfg)
    name = pod_name(cfg.k8s.pod_prefix, job.run_id, job.node_id)
    kubernetes_validate.validate(as_dict(pod(name, job, cfg.k8s, "host-1", 4096)), VERSION, strict=True)
    kubernetes_validate.validate(as_dict(config_map(name, job, cfg.k8s, "host-1")), VERSION, strict=True)


def test_an_invalid_pod_is_rejected_by_the_same_validation():
    bad = as_dict(pod("x", job_for("print(1)", ExecutorConfig()), ExecutorConfig().k8s, "h", 100))
    bad["spec"]["containers"][0]["resources"]["limits"]["memory"] = {"not": "a quantity"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)


def test_gpu_node_gets_the_gpu_resource_node_selector_and_toleration():
    cfg = ExecutorConfig(backend="k8s", caps={"cpu": 16})
    spec = as_dict(pod("p", job_for(GPU_CODE, cfg), cfg.k8s, "h", 100))["spec"]
    res = spec["containers"][0]["resources"]
    assert res["limits"] == {
        "cpu": "8000m",
        "memory": "16384Mi",
        "ephemeral-storage": "4096Mi",
        "nvidia.com/gpu": "1",
    }
    assert res["requests"] == res["limits"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert "runtimeClassName" not in spec


def test_cpu_node_has_no_gpu_and_is_locked_down():
    cfg = ExecutorConfig(backend="k8s")
    spec = as_dict(pod("p", job_for("print(1)", cfg), cfg.k8s, "h", 100))["spec"]
    c = spec["containers"][0]
    assert "nvidia.com/gpu" not in c["resources"]["limits"] and "nodeSelector" not in spec
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == 65534
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert (
        mounts["/workspace/input"]["readOnly"]
        and mounts["/workspace/input"]["subPath"] == "aerial-cactus-identification"
    )
    assert spec["volumes"][0]["emptyDir"]["sizeLimit"] == "4096Mi"
    assert not any(arg.startswith("/") for arg in c["command"][1:]), (
        "the command must use relative paths only"
    )


def test_pod_names_are_dns_labels_and_keep_the_node_id():
    name = pod_name("tg-exec", "20260701_231713_A_very_long_run_name_that_goes_on_and_on", "3fa2c01b9e4d")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63
    assert name.endswith("-3fa2c01b9e4d")


def test_log_parsing_takes_the_last_markers_so_a_script_cannot_forge_an_earlier_one():
    sub = b"id,label\n1,0.9\n"
    forged = f"{EXIT_MARK}0\n{SUB_MARK}{base64.b64encode(zlib.compress(b'forged')).decode()}\n"
    log = f"hello\n{forged}Traceback (most recent call last):\nValueError: x\n\n{EXIT_MARK}1\n"
    body, rc, got = parse_log(log)
    assert rc == 1 and got is None and "ValueError" in body
    log = f"ok\n\n{EXIT_MARK}0\n{SUB_MARK}{base64.b64encode(zlib.compress(sub)).decode()}\n"
    assert parse_log(log) == ("ok\n", 0, sub)
    assert parse_log("no markers at all") == ("no markers at all", None, None)
    assert parse_log(f"x\n{EXIT_MARK}0\n{SUB_MARK}!!!notbase64\n")[2] is None
