"""A local Kubernetes API-server simulator for the executor's k8s backend (tests only).

It serves, over HTTP on 127.0.0.1, the endpoints the backend uses (ConfigMaps and Pods: create,
read, delete, list, log) and really runs each pod's container command as a local process. It is
not a kubelet: see `K8sSim` for exactly what it does and does not emulate.
"""

from ._server import K8sSim

__all__ = ["K8sSim"]
