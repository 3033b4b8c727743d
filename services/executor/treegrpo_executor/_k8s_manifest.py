"""The Kubernetes objects of one node: a ConfigMap holding the script, and the pod that runs it.

The pod's container runs `WRAPPER` with the image's python, in /workspace (an emptyDir sized by
`ephemeral`): it copies the script from the ConfigMap (mounted at /workspace/.code), runs it with
its output to a file, then prints the output's tail, an exit marker and the submission (zlib +
base64) to the container log, which is how the executor retrieves the result with only `pods/log`.
No absolute path appears in the command: the simulator in tests/k8s_sim relies on that.
"""

from __future__ import annotations

import re

from kubernetes import client as k8s

from treegrpo_executor._outcome import Job
from treegrpo_executor._workspace import MAX_SUBMISSION
from treegrpo_executor.config import K8sSettings

APP_LABEL = "treegrpo-exec"
EXIT_MARK = "@@TG-EXIT "
SUB_MARK = "@@TG-SUB "
WRAPPER = """\
import base64, os, shutil, stat, subprocess, sys, zlib
for d in ('submission', 'tmp'):
    os.makedirs(d, exist_ok=True)
shutil.copy('.code/script.py', 'script.py')
with open('.tg-out', 'wb') as out:
    rc = subprocess.call([sys.executable, '-u', 'script.py'], stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
rc = rc if rc >= 0 else 128 - rc
w = sys.stdout.buffer.write
with open('.tg-out', 'rb') as f:
    f.seek(max(0, os.path.getsize('.tg-out') - {tail}))
    w(f.read())
w(b'\\n{exit}%d\\n' % rc)
fl = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
try:  # no symlink followed at any component; regular files up to the cap only
    d = os.open('submission', fl | os.O_DIRECTORY)
    fd = os.open('submission.csv', fl, dir_fd=d)
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_size <= {cap}:
        with os.fdopen(fd, 'rb') as f:
            w(b'{sub}' + base64.b64encode(zlib.compress(f.read({cap}))) + b'\\n')
except OSError:
    pass
sys.stdout.flush()
sys.exit(rc)
"""


def pod_name(prefix: str, run_id: str, node_id: str) -> str:
    """A DNS-1123 label: lowercase alphanumerics and '-', at most 63 characters, node id kept whole."""
    run = re.sub(r"[^a-z0-9-]", "-", run_id.lower()).strip("-")
    head = f"{prefix}-{run}"[: 63 - len(node_id) - 1].rstrip("-")
    return f"{head}-{node_id.lower()}"


def labels(job: Job, instance: str) -> dict[str, str]:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", instance)[:63].strip("-_.") or "executor"
    return {"app": APP_LABEL, "treegrpo/node": job.node_id, "treegrpo/executor": safe}


def config_map(name: str, job: Job, cfg: K8sSettings, instance: str) -> k8s.V1ConfigMap:
    meta = k8s.V1ObjectMeta(name=name, namespace=cfg.namespace, labels=labels(job, instance))
    return k8s.V1ConfigMap(api_version="v1", kind="ConfigMap", metadata=meta, data={"script.py": job.code})


def _quantity(gib: float) -> str:
    return f"{int(round(gib * 1024))}Mi"


def _resources(job: Job) -> k8s.V1ResourceRequirements:
    lim = job.limits
    amounts = {
        "cpu": f"{int(round(lim.cpu * 1000))}m",
        "memory": _quantity(lim.mem_gib),
        "ephemeral-storage": _quantity(lim.ephemeral_gib),
    }
    if lim.gpu:
        amounts["nvidia.com/gpu"] = str(lim.gpu)
    return k8s.V1ResourceRequirements(requests=dict(amounts), limits=dict(amounts))


def _data_volume(cfg: K8sSettings) -> k8s.V1Volume:
    if cfg.data_claim:
        src = k8s.V1PersistentVolumeClaimVolumeSource(claim_name=cfg.data_claim, read_only=True)
        return k8s.V1Volume(name="data", persistent_volume_claim=src)
    return k8s.V1Volume(
        name="data", host_path=k8s.V1HostPathVolumeSource(path=cfg.data_host_path, type="Directory")
    )


def pod(name: str, job: Job, cfg: K8sSettings, instance: str, tail_bytes: int) -> k8s.V1Pod:
    lim = job.limits
    threads = str(max(1, int(lim.cpu)))
    env = [
        k8s.V1EnvVar(name=k, value=v)
        for k, v in {
            "PYTHONUNBUFFERED": "1",
            "MPLBACKEND": "Agg",
            "HOME": "/workspace",
            "TMPDIR": "/workspace/tmp",
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
        }.items()
    ]
    code = (
        WRAPPER.replace("{tail}", str(tail_bytes))
        .replace("{cap}", str(MAX_SUBMISSION))
        .replace("{exit}", EXIT_MARK)
        .replace("{sub}", SUB_MARK)
    )
    container = k8s.V1Container(
        name="node",
        image=cfg.image,
        command=[cfg.python, "-I", "-c", code],
        working_dir="/workspace",
        env=env,
        resources=_resources(job),
        volume_mounts=[
            k8s.V1VolumeMount(name="work", mount_path="/workspace"),
            k8s.V1VolumeMount(name="code", mount_path="/workspace/.code", read_only=True),
            k8s.V1VolumeMount(
                name="data",
                mount_path="/workspace/input",
                read_only=True,
                sub_path=cfg.data_subpath.format(task=job.task),
            ),
        ],
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            run_as_non_root=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
    )
    volumes = [
        k8s.V1Volume(
            name="work", empty_dir=k8s.V1EmptyDirVolumeSource(size_limit=_quantity(lim.ephemeral_gib))
        ),
        k8s.V1Volume(name="code", config_map=k8s.V1ConfigMapVolumeSource(name=name, default_mode=0o444)),
        _data_volume(cfg),
    ]
    gpu = bool(lim.gpu)
    spec = k8s.V1PodSpec(
        restart_policy="Never",
        containers=[container],
        volumes=volumes,
        active_deadline_seconds=int(lim.timeout_s) + 60,  # backstop; the executor deletes at timeout_s
        automount_service_account_token=False,
        enable_service_links=False,
        node_selector=dict(cfg.gpu_node_selector if gpu else cfg.cpu_node_selector) or None,
        tolerations=[k8s.V1Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]
        if gpu
        else None,
        runtime_class_name=cfg.runtime_class or None,
        security_context=k8s.V1PodSecurityContext(
            run_as_user=65534,
            run_as_group=65534,
            fs_group=65534,
            run_as_non_root=True,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )
    meta = k8s.V1ObjectMeta(name=name, namespace=cfg.namespace, labels=labels(job, instance))
    return k8s.V1Pod(api_version="v1", kind="Pod", metadata=meta, spec=spec)
