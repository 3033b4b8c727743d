"""ExecutorConfig: the resource gate's ranges and defaults, the sandbox caps, the backends' settings.

Two kinds of bounds, on purpose:
- *ranges* judge a script's PEP 723 declaration: a value outside its range rejects the whole
  declaration (the seed's `gpu=0 out of range 1..1`), and the node runs with the defaults;
- *caps* are what this machine can give: an accepted declaration is clipped to them.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from treegrpo.config import InfraSettings, Section, ServiceSettings, treegrpo_home


class Range(Section):
    lo: float = Field(description="Smallest accepted declared value")
    hi: float = Field(description="Largest accepted declared value")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.lo > self.hi:
            raise ValueError(f"range {self.lo}..{self.hi} is empty")
        return self


class GateSettings(Section):
    """How `[tool.resources]` is judged (units: cpu cores, mem and ephemeral GiB, gpu devices)."""

    cpu: Range = Field(default_factory=lambda: Range(lo=1, hi=64), description="Accepted `cpu` values")
    mem: Range = Field(default_factory=lambda: Range(lo=1, hi=512), description="Accepted `mem` values (GiB)")
    ephemeral: Range = Field(
        default_factory=lambda: Range(lo=1, hi=500), description="Accepted `ephemeral` values (GiB)"
    )
    gpu: Range = Field(
        default_factory=lambda: Range(lo=1, hi=1), description="Accepted `gpu` values (the seed: 1..1)"
    )
    default_cpu: float = Field(default=2, gt=0, description="Cores when nothing valid was declared")
    default_mem: float = Field(default=8, gt=0, description="GiB of memory when nothing valid was declared")
    default_ephemeral: float = Field(
        default=4, gt=0, description="GiB of workspace disk when nothing valid was declared"
    )


class CapSettings(Section):
    """What this executor can give one node, whatever it declared."""

    cpu: float = Field(
        default_factory=lambda: float(os.cpu_count() or 1),
        gt=0,
        description="Most cores a node gets (default: this machine's count)",
    )
    mem_gib: float = Field(
        default=64,
        gt=0,
        description=(
            "Most GiB of memory: the node cgroup's limit (shmem and tmpfs included), RLIMIT_AS of CPU nodes, "
            "the pod memory limit"
        ),
    )
    ephemeral_gib: float = Field(
        default=50,
        gt=0,
        description=(
            "Most GiB of workspace disk: the node file system's size, per-file RLIMIT_FSIZE, "
            "the pod emptyDir sizeLimit"
        ),
    )
    nproc: int = Field(
        default=256,
        ge=8,
        description="Most processes/threads of a node (cgroup pids.max, and RLIMIT_NPROC of its sandbox uid)",
    )
    nofile: int = Field(default=1024, ge=64, description="Most open files (RLIMIT_NOFILE)")
    output_bytes: int = Field(
        default=64 * 2**20, ge=4096, description="Most bytes of stdout+stderr before the node is killed"
    )


class LocalSettings(Section):
    workspace_root: str = Field(
        default_factory=lambda: str(treegrpo_home() / "executor" / "workspaces"),
        description="One folder per node is made under here",
    )
    keep_workspaces: bool = Field(
        default=False,
        description=(
            "Keep a node's workspace after it ran (debugging): the host folder unjailed, "
            "the ext4 image of a loop disk (a tmpfs disk dies with the node)"
        ),
    )
    sandbox_uid_base: int = Field(
        default=61000,
        ge=1000,
        description="Slot k runs as uid/gid base+k (when started as root), so nodes cannot read each other",
    )
    namespaces: bool = Field(
        default=True,
        description="Use user-less mount/pid/net/ipc/uts namespaces when the kernel allows (root only)",
    )
    hidden_paths: list[str] = Field(
        default_factory=lambda: [str(treegrpo_home() / "tasks" / "private")],
        description=(
            "Folders masked with an empty tmpfs inside the sandbox (answers); "
            "`prepared/private` under each public root is added"
        ),
    )
    python: str = Field(
        default="",
        description="Interpreter the scripts run with (needs the ML stack); empty: the service's own",
    )
    jail_dir: str = Field(
        default="/mnt",
        description=(
            "Existing folder the jail covers with a tmpfs to show the workspace at <jail_dir>/work "
            "(inside the jail only)"
        ),
    )
    disk_poll_s: float = Field(
        default=1.0,
        gt=0,
        description="Unjailed only: how often the workspace folder's size is checked against `ephemeral`",
    )
    disk: Literal["auto", "loop", "tmpfs"] = Field(
        default="auto",
        description=(
            "A jailed node's file system (`ephemeral` bytes, `inodes_per_gib` inodes): `tmpfs` "
            "(RAM: the node's memory limit grows by it), `loop` (an ext4 image on the host's disk, "
            "loop-mounted), `auto`: tmpfs up to `tmpfs_max_gib`, loop above"
        ),
    )
    tmpfs_max_gib: float = Field(
        default=4,
        ge=0,
        description=(
            "With disk = auto: the largest `ephemeral` given a tmpfs "
            "(faster to make and tear down than a loop mount)"
        ),
    )
    inodes_per_gib: int = Field(
        default=65536,
        ge=1024,
        description="Inodes of a node's file system per GiB of `ephemeral` (at least 1024)",
    )
    cgroups: bool = Field(
        default=True,
        description=(
            "Put each node in its own cgroup (memory incl. shmem, cpuset, pids) when root; "
            "off: polling and rlimits only"
        ),
    )
    cgroup_root: str = Field(
        default="/sys/fs/cgroup",
        description="Where the cgroup file systems are mounted (v2 there or at ./unified, v1 per controller)",
    )
    gpu_devices: list[str] = Field(
        default_factory=list,
        description="GPU indices a GPU node may get (CUDA_VISIBLE_DEVICES); empty: GPU nodes run without one",
    )


class K8sSettings(Section):
    namespace: str = Field(default="treegrpo", description="Namespace the pods run in")
    image: str = Field(
        default="ghcr.io/treegrpo/sandbox:latest",
        description="Image with python and the ML stack the scripts use",
    )
    python: str = Field(default="python", description="Interpreter inside the image")
    kubeconfig: str = Field(
        default="", description="Path to a kubeconfig; empty: in-cluster config, then ~/.kube/config"
    )
    api_url: str = Field(
        default="", description="API server URL without credentials (tests: the local simulator)"
    )
    data_claim: str = Field(
        default="",
        description="PVC holding the public task data (read-only); empty: hostPath `data_host_path`",
    )
    data_subpath: str = Field(
        default="{task}",
        description=(
            "Folder of a task's public data inside the data volume; `{task}/prepared/public` for MLE-bench"
        ),
    )
    data_host_path: str = Field(
        default="/data/treegrpo/public", description="hostPath of the public data when no PVC is named"
    )
    gpu_node_selector: dict[str, str] = Field(
        default_factory=lambda: {"nvidia.com/gpu.present": "true"}, description="Node selector of GPU pods"
    )
    cpu_node_selector: dict[str, str] = Field(default_factory=dict, description="Node selector of CPU pods")
    pod_prefix: str = Field(default="tg-exec", description="Pod names are <prefix>-<run>-<node>")
    poll_s: float = Field(default=0.5, gt=0, description="Pod status poll interval")
    pending_timeout_s: float = Field(
        default=900, gt=0, description="A pod still pending after this long is deleted and the node retried"
    )
    runtime_class: str = Field(
        default="", description="RuntimeClass of the pod (e.g. gvisor); empty: the cluster default"
    )


class GpuGuardSettings(Section):
    enabled: bool = Field(default=True, description="Kill GPU nodes that leave their GPU idle")
    grace_s: float = Field(
        default=180, gt=0, description="A GPU idle for this long without a break is killed (GpuIdleError)"
    )
    threshold_pct: float = Field(
        default=1.0, ge=0, le=100, description="Utilisation below this counts as idle"
    )
    poll_s: float = Field(default=2.0, gt=0, description="NVML sampling interval")


class ExecutorConfig(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="TREEGRPO_EXECUTOR_", extra="forbid", env_nested_delimiter="__"
    )

    backend: Literal["local", "k8s"] = Field(
        default="local",
        description="Where scripts run: local sandboxed processes, or one Kubernetes pod per node",
    )
    max_concurrency: int = Field(
        default=4, ge=0, description="Nodes executed at once; 0 = this machine's core count"
    )
    timeout_s: float = Field(
        default=900, gt=0, description="Wall-clock limit of one script; the whole sandbox is killed after it"
    )
    public_data_roots: list[str] = Field(
        default_factory=lambda: [str(treegrpo_home() / "tasks" / "public")],
        description="Roots searched for `<root>/<task>/prepared/public` then `<root>/<task>`",
    )
    tail_lines: int = Field(default=50, ge=1, description="Lines of output kept in `term_tail`")
    tail_bytes: int = Field(default=8192, ge=256, description="At most this many bytes of `term_tail`")
    ack_wait_s: float = Field(
        default=30,
        gt=0,
        description="Redelivery of a node whose executor died without a word (heartbeats keep running nodes)",
    )
    skip_executed: bool = Field(
        default=True, description="On redelivery, do not re-run a node whose node.executed already exists"
    )
    infra: InfraSettings = Field(
        default_factory=InfraSettings,
        description="A node the sandbox, workspace or object store fails: retries, masking, stopping",
    )
    gate: GateSettings = Field(
        default_factory=GateSettings, description="Resource declaration ranges and defaults"
    )
    caps: CapSettings = Field(default_factory=CapSettings, description="Per-node ceilings of this executor")
    local: LocalSettings = Field(default_factory=LocalSettings, description="Local sandbox backend")
    k8s: K8sSettings = Field(default_factory=K8sSettings, description="Kubernetes backend")
    gpu_guard: GpuGuardSettings = Field(default_factory=GpuGuardSettings, description="GPU-idle guard")

    @model_validator(mode="after")
    def _slots_from_cores(self) -> ExecutorConfig:
        # 0 resolves here, so every reader of max_concurrency sees a real slot count
        if self.max_concurrency == 0:
            self.max_concurrency = os.cpu_count() or 1
        return self
