"""How the simulator runs one pod: volumes as local folders, the container command as a process."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SimPod:
    """One pod: Pending for `pending_s`, then its first container runs in a folder standing for the
    container's working directory; nested volume mounts appear there as symlinks."""

    def __init__(
        self,
        manifest: dict,
        root: Path,
        configmaps: dict,
        claims: dict[str, str],
        host_paths: dict[str, str],
        pending_s: float,
    ):
        self.manifest = manifest
        self.name = manifest["metadata"]["name"]
        self.ns = manifest["metadata"].get("namespace", "default")
        self.dir = root / self.ns / self.name
        self.configmaps, self.claims, self.host_paths = configmaps, claims, host_paths
        self.pending_s = pending_s
        self.status: dict = {"phase": "Pending"}
        self.proc: subprocess.Popen | None = None
        self.deleted = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._lifecycle, daemon=True)

    @property
    def log_path(self) -> Path:
        return self.dir / "container.log"

    def to_json(self) -> dict:
        with self.lock:
            return {**self.manifest, "status": dict(self.status)}

    def _container_status(self, state: dict) -> list[dict]:
        c = self.manifest["spec"]["containers"][0]
        return [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "sim://" + c.get("image", ""),
                "ready": "running" in state,
                "restartCount": 0,
                "state": state,
            }
        ]

    def _set(self, **kw) -> None:
        with self.lock:
            self.status.update(kw)

    def _fail(self, reason: str, message: str) -> None:
        self._set(phase="Failed", reason=reason, message=message)

    def _volume_dir(self, vol: dict, work: Path) -> Path | None:
        if "emptyDir" in vol:
            path = self.dir / "volumes" / vol["name"]
            path.mkdir(parents=True, exist_ok=True)
            return path
        if "configMap" in vol:
            cm = self.configmaps.get((self.ns, vol["configMap"]["name"]))
            if cm is None:
                return None
            path = self.dir / "volumes" / vol["name"]
            path.mkdir(parents=True, exist_ok=True)
            for key, text in (cm.get("data") or {}).items():
                (path / key).write_text(text)
            return path
        if "persistentVolumeClaim" in vol:
            claim = self.claims.get(vol["persistentVolumeClaim"]["claimName"])
            return Path(claim) if claim else None
        if "hostPath" in vol:
            hp = vol["hostPath"]["path"]
            return Path(self.host_paths.get(hp, hp))
        return None

    def _materialize(self) -> tuple[Path, str | None]:
        """The working directory with every mount in place; or an error message."""
        c = self.manifest["spec"]["containers"][0]
        workdir = c.get("workingDir", "/")
        vols = {v["name"]: v for v in self.manifest["spec"].get("volumes", [])}
        work = self.dir / "root"
        mounts = sorted(c.get("volumeMounts", []), key=lambda m: len(m["mountPath"]))
        for m in mounts:
            src = self._volume_dir(vols.get(m["name"], {}), work)
            if src is None:
                return work, f"volume {m['name']} cannot be provided"
            if m.get("subPath"):
                src = src / m["subPath"]
            if m["mountPath"] == workdir:
                work = src
                continue
            rel = os.path.relpath(m["mountPath"], workdir)
            if rel.startswith(".."):
                return work, f"mount {m['mountPath']} outside workingDir is not simulated"
            target = work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(src, target_is_directory=True)
        work.mkdir(parents=True, exist_ok=True)
        return work, None

    def _lifecycle(self) -> None:
        if self.deleted.wait(self.pending_s):
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        work, err = self._materialize()
        if err:
            self._fail("SimUnsupported", err)
            return
        c = self.manifest["spec"]["containers"][0]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        env.update({e["name"]: e.get("value", "") for e in c.get("env", [])})
        with open(self.log_path, "wb") as log:
            with self.lock:
                if self.deleted.is_set():
                    return
                self.proc = subprocess.Popen(
                    c.get("command", []) + c.get("args", []),
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            started = now_rfc3339()
            self._set(
                phase="Running",
                startTime=started,
                containerStatuses=self._container_status({"running": {"startedAt": started}}),
            )
            self._wait(started)

    def _wait(self, started: str) -> None:
        deadline = self.manifest["spec"].get("activeDeadlineSeconds")
        t0 = time.monotonic()
        while self.proc.poll() is None:
            if deadline and time.monotonic() - t0 > deadline:
                self.kill()
                self._fail("DeadlineExceeded", f"Pod was active on the node longer than {deadline}s")
                return
            time.sleep(0.05)
        rc = self.proc.returncode
        rc = rc if rc >= 0 else 128 - rc
        term = {
            "terminated": {
                "exitCode": rc,
                "reason": "Completed" if rc == 0 else "Error",
                "startedAt": started,
                "finishedAt": now_rfc3339(),
            }
        }
        self._set(phase="Succeeded" if rc == 0 else "Failed", containerStatuses=self._container_status(term))

    def kill(self) -> None:
        with self.lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def delete(self) -> None:
        self.deleted.set()
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
