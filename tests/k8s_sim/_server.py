"""The simulator's HTTP side: the core/v1 ConfigMap and Pod endpoints, JSON in and out."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import kubernetes_validate

from ._pods import SimPod, now_rfc3339

K8S_VERSION = "1.37.0"
_ROUTE = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pods|configmaps)(?:/(?P<name>[^/]+))?(?P<log>/log)?$"
)


class K8sSim:
    """Serves POST/GET/DELETE of pods and configmaps, GET pods/<name>/log and list by label.

    Emulated: object storage, 404/409/422 answers (every created object is validated against
    the Kubernetes 1.37 schema, strictly), Pending -> Running -> Succeeded/Failed, nested volume
    mounts (emptyDir, configMap, PVC via `claims`, hostPath via `host_paths`), activeDeadlineSeconds,
    deletion killing the process group. Not emulated: scheduling, resource limits, securityContext
    (the command runs as this process's user), images (the command must exist on this machine),
    watches, authentication."""

    def __init__(
        self,
        claims: dict[str, str] | None = None,
        host_paths: dict[str, str] | None = None,
        pending_s: float = 0.2,
    ):
        self.root = Path(tempfile.mkdtemp(prefix="k8s-sim-"))
        self.claims, self.host_paths, self.pending_s = claims or {}, host_paths or {}, pending_s
        self.pods: dict[tuple[str, str], SimPod] = {}
        self.configmaps: dict[tuple[str, str], dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> K8sSim:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        for pod in list(self.pods.values()):
            pod.delete()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- operations -----------------------------------------------------------------------------
    def create(self, ns: str, kind: str, body: dict) -> tuple[int, dict]:
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Pod" if kind == "pods" else "ConfigMap")
        try:
            kubernetes_validate.validate(body, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return 422, status(422, "Invalid", f"{body['kind']} is invalid: {exc.message}")
        meta = body.setdefault("metadata", {})
        meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), resourceVersion="1")
        key = (ns, meta["name"])
        with self.lock:
            store = self.pods if kind == "pods" else self.configmaps
            if key in store:
                return 409, status(409, "AlreadyExists", f'{kind} "{key[1]}" already exists')
            if kind == "configmaps":
                self.configmaps[key] = body
                return 201, body
            pod = SimPod(body, self.root, self.configmaps, self.claims, self.host_paths, self.pending_s)
            self.pods[key] = pod
        pod.thread.start()
        return 201, pod.to_json()

    def get(self, ns: str, kind: str, name: str) -> tuple[int, dict]:
        obj = (self.pods if kind == "pods" else self.configmaps).get((ns, name))
        if obj is None:
            return 404, status(404, "NotFound", f'{kind} "{name}" not found')
        return 200, obj.to_json() if kind == "pods" else obj

    def delete(self, ns: str, kind: str, name: str) -> tuple[int, dict]:
        with self.lock:
            obj = (self.pods if kind == "pods" else self.configmaps).pop((ns, name), None)
        if obj is None:
            return 404, status(404, "NotFound", f'{kind} "{name}" not found')
        if kind == "pods":
            data = obj.to_json()
            obj.delete()
            return 200, data
        return 200, obj

    def list(self, ns: str, kind: str, selector: str) -> dict:
        want = dict(p.split("=", 1) for p in selector.split(",") if "=" in p)
        store = self.pods if kind == "pods" else self.configmaps
        items = []
        for (ons, _), obj in list(store.items()):
            data = obj.to_json() if kind == "pods" else obj
            labels = data["metadata"].get("labels") or {}
            if ons == ns and all(labels.get(k) == v for k, v in want.items()):
                items.append(data)
        kind_name = "PodList" if kind == "pods" else "ConfigMapList"
        return {"apiVersion": "v1", "kind": kind_name, "metadata": {"resourceVersion": "1"}, "items": items}

    def log(self, ns: str, name: str) -> tuple[int, bytes]:
        pod = self.pods.get((ns, name))
        if pod is None:
            return 404, json.dumps(status(404, "NotFound", f'pods "{name}" not found')).encode()
        return 200, pod.log_path.read_bytes() if pod.log_path.exists() else b""


def status(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _handler_for(sim: K8sSim):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet: tests read sim.requests instead
            pass

        def _reply(self, code: int, payload, content_type: str = "application/json") -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self):
            path, _, query = self.path.partition("?")
            sim.requests.append((self.command, path))
            m = _ROUTE.match(path)
            params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            return m, params

        def _body(self) -> dict:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}")

        def do_POST(self) -> None:
            m, _ = self._route()
            if not m or m["name"]:
                return self._reply(404, status(404, "NotFound", self.path))
            self._reply(*sim.create(m["ns"], m["kind"], self._body()))

        def do_GET(self) -> None:
            m, params = self._route()
            if not m:
                return self._reply(404, status(404, "NotFound", self.path))
            if m["log"]:
                code, data = sim.log(m["ns"], m["name"])
                return self._reply(code, data, "text/plain" if code == 200 else "application/json")
            if m["name"]:
                return self._reply(*sim.get(m["ns"], m["kind"], m["name"]))
            from urllib.parse import unquote

            self._reply(200, sim.list(m["ns"], m["kind"], unquote(params.get("labelSelector", ""))))

        def do_DELETE(self) -> None:
            m, _ = self._route()
            self._body()
            if not m or not m["name"]:
                return self._reply(404, status(404, "NotFound", self.path))
            self._reply(*sim.delete(m["ns"], m["kind"], m["name"]))

    return Handler
