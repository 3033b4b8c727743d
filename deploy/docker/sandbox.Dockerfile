# syntax=docker/dockerfile:1.7
# The image node pods run in on Kubernetes (ExecutorConfig.k8s.image): Python (`python` on PATH, the
# executor's k8s.python) and the ML stack the agent's scripts use; no treegrpo, no credentials. The
# executor mounts the script and the public data; the namespace's deny-all policy keeps it offline.
#   docker build -f deploy/docker/sandbox.Dockerfile -t treegrpo/sandbox:0.1.0 deploy/docker
# Base pinned by exact version; add @sha256:<digest> after checking it (see service.Dockerfile).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
ARG PACKAGES="numpy<3 pandas<4 scikit-learn<2 scipy<2 pillow<13 lightgbm<5"
RUN python -m venv /opt/venv && /opt/venv/bin/pip install ${PACKAGES}

FROM ${PYTHON_IMAGE} AS runtime
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:${PATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# nobody: the uid the executor's pods run as (runAsUser 65534), with no home and no shell.
USER 65534:65534
WORKDIR /workspace
CMD ["python", "--version"]
