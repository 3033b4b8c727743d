"""Kubernetes backend: one pod per node through the official `kubernetes` client.

Lifecycle of a node (each step's time goes to `exec_timings`):
  stage     create the script's ConfigMap and the pod
  pending   until the pod leaves Pending (scheduling, image pull)
  exec      until it ends, or `timeout_s` after it started (then it is deleted: status timeout)
  retrieve  read its log (output tail, exit code, submission), delete the pod and the ConfigMap
The pod and ConfigMap are deleted in every case: success, crash, timeout, and service shutdown.
The client is synchronous; every call runs in a worker thread so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
import socket
import time
import zlib

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from treegrpo_executor import _k8s_manifest as manifest
from treegrpo_executor._host import SandboxError
from treegrpo_executor._outcome import (
    CRASHED,
    NO_SUBMISSION,
    OK,
    TIMEOUT,
    Job,
    Outcome,
    Timings,
    exc_type_from_output,
    signal_name,
    tail,
)
from treegrpo_executor.config import ExecutorConfig

log = logging.getLogger(__name__)
_DONE = ("Succeeded", "Failed")


def api_client(cfg: ExecutorConfig) -> k8s.ApiClient:
    s = cfg.k8s
    if s.api_url:
        conf = k8s.Configuration(host=s.api_url)
        return k8s.ApiClient(conf)
    if s.kubeconfig:
        return k8s_config.new_client_from_config(config_file=s.kubeconfig)
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException:
        k8s_config.load_kube_config()
    return k8s.ApiClient()


class K8sBackend:
    name = "k8s"

    def __init__(self, cfg: ExecutorConfig, api: k8s.ApiClient | None = None):
        self.cfg = cfg
        self.s = cfg.k8s
        self._api = api
        self.core: k8s.CoreV1Api | None = None
        self.instance = f"{socket.gethostname()}-{os.getpid()}"
        self.slots = asyncio.Semaphore(cfg.max_concurrency)
        self.live: set[str] = set()  # pods this executor created and has not deleted yet

    async def start(self) -> None:
        api = self._api or await asyncio.to_thread(api_client, self.cfg)
        self.core = k8s.CoreV1Api(api)

    async def _call(self, fn, *args, **kw):
        return await asyncio.to_thread(fn, *args, **kw)

    async def run(self, job: Job) -> Outcome:
        t0 = time.monotonic()
        async with self.slots:
            t_slot = time.monotonic()
            name = manifest.pod_name(self.s.pod_prefix, job.run_id, job.node_id)
            try:
                return await self._run_pod(job, name, t_slot - t0)
            finally:
                await asyncio.shield(self._delete(name))

    async def _run_pod(self, job: Job, name: str, waited: float) -> Outcome:
        t0 = time.monotonic()
        await self._delete(name)  # a redelivered node may find its earlier pod
        try:
            await self._call(
                self.core.create_namespaced_config_map,
                self.s.namespace,
                manifest.config_map(name, job, self.s, self.instance),
            )
            body = manifest.pod(name, job, self.s, self.instance, 8 * self.cfg.tail_bytes)
            await self._call(self.core.create_namespaced_pod, self.s.namespace, body)
        except ApiException as exc:
            raise SandboxError(f"creating pod {name}: {exc.status} {exc.reason}") from exc
        self.live.add(name)
        t_created = time.monotonic()
        pod, t_started, timed_out = await self._wait(name, job.limits.timeout_s, t_created)
        t_end = time.monotonic()
        out = await self._collect(name, pod, timed_out)
        out.exec_time = t_end - t_started
        out.timings = Timings(
            pending=waited + t_started - t_created,
            stage=t_created - t0,
            exec=out.exec_time,
            retrieve=time.monotonic() - t_end,
        )
        out.where = f"k8s:{name}"
        return out

    async def _wait(self, name: str, timeout_s: float, t_created: float):
        """Poll the pod until it ends; returns (pod, start time, timed out?)."""
        started = None
        while True:
            try:
                pod = await self._call(self.core.read_namespaced_pod, name, self.s.namespace)
            except ApiException as exc:
                raise SandboxError(f"pod {name} vanished: {exc.status} {exc.reason}") from exc
            now = time.monotonic()
            phase = pod.status.phase if pod.status else None
            if started is None and phase not in (None, "Pending"):
                started = now
            if phase in _DONE:
                return pod, started, False
            if started is None and now - t_created > self.s.pending_timeout_s:
                raise SandboxError(f"pod {name} pending for {self.s.pending_timeout_s:.0f}s")
            if started is not None and now - started > timeout_s:
                return pod, started, True
            await asyncio.sleep(self.s.poll_s)

    async def _collect(self, name: str, pod, timed_out: bool) -> Outcome:
        if timed_out:
            return Outcome(status=TIMEOUT)
        term = _terminated(pod)
        try:
            text = await self._call(
                self.core.read_namespaced_pod_log, name, self.s.namespace, container="node"
            )
        except ApiException:
            text = ""
        body, rc, sub = parse_log(text or "")
        if pod.status.reason == "DeadlineExceeded":
            return Outcome(status=TIMEOUT, term_tail=self._tail(body))
        if pod.status.reason == "Evicted":
            return Outcome(status=CRASHED, exc_type="DiskQuotaExceeded", term_tail=self._tail(body))
        if term is not None and term.reason == "OOMKilled":
            return Outcome(status=CRASHED, exc_type="MemoryError", term_tail=self._tail(body))
        if rc is None:
            rc = term.exit_code if term is not None else 1
        if rc != 0:
            exc = exc_type_from_output(body) or signal_name(rc) or "SystemExit"
            return Outcome(status=CRASHED, exc_type=exc, term_tail=self._tail(body))
        return Outcome(
            status=OK if sub is not None else NO_SUBMISSION, term_tail=self._tail(body), submission=sub
        )

    def _tail(self, text: str) -> str:
        return tail(text, self.cfg.tail_lines, self.cfg.tail_bytes)

    async def _delete(self, name: str) -> None:
        opts = k8s.V1DeleteOptions(grace_period_seconds=0, propagation_policy="Background")
        for fn in (self.core.delete_namespaced_pod, self.core.delete_namespaced_config_map):
            try:
                await self._call(fn, name, self.s.namespace, body=opts)
            except ApiException as exc:
                if exc.status != 404:
                    log.warning("deleting %s: %s %s", name, exc.status, exc.reason)
        self.live.discard(name)

    async def close(self) -> None:
        """Delete every pod still running for this executor (their nodes run again elsewhere)."""
        for name in list(self.live):
            with contextlib.suppress(Exception):
                await self._delete(name)


def _terminated(pod):
    statuses = (pod.status.container_statuses or []) if pod.status else []
    for st in statuses:
        if st.name == "node" and st.state is not None and st.state.terminated is not None:
            return st.state.terminated
    return None


def parse_log(text: str) -> tuple[str, int | None, bytes | None]:
    """Split the wrapper's log into (script output tail, exit code, submission bytes).

    The markers are searched from the end: what the script printed itself comes before them."""
    cut = text.rfind("\n" + manifest.EXIT_MARK)
    if cut < 0:
        return text, None, None
    body, rest = text[:cut], text[cut + 1 :].splitlines()
    try:
        rc = int(rest[0][len(manifest.EXIT_MARK) :].strip())
    except (ValueError, IndexError):
        return body, None, None
    sub = None
    for line in rest[1:]:
        if line.startswith(manifest.SUB_MARK):
            with contextlib.suppress(binascii.Error, zlib.error, ValueError):
                sub = zlib.decompress(base64.b64decode(line[len(manifest.SUB_MARK) :].strip(), validate=True))
    return body, rc, sub
