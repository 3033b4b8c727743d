# syntax=docker/dockerfile:1.7
# One image per service: the core distribution (treegrpo) plus one service's (services/<name>/), each
# with only the dependencies it declares:
#   docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=grader -t treegrpo/grader:0.1.0 .
# (docker compose -f deploy/compose.yaml build does this for all four, with the arguments it gives each.)
#
# Layers, so that the four images store and pull what they have in common once:
#   base | user, folders | core: treegrpo[tasks]          the same in all four images
#        | shared: SHARED_PACKAGES (torch, transformers)  the same in the sampler's and the learner's
#        | the one service and its own extras
# No build argument that differs between the images is declared before the layer it belongs to, and
# each of the last two layers holds only the files its install added (deploy/docker/venv_delta.py).
#
# The base is pinned to an exact Python and Debian release. Its digest could not be checked here
# (no registry access besides PyPI/Debian/npm); pin it yourself with
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm
# and --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:<digest>. Any Debian-like image
# with `python3` (3.11, the venv module) and useradd works too: scripts/stack_images.py builds one
# from Debian's packages (debootstrap) where no container registry is reachable.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ---- core: a virtual environment holding treegrpo with its `tasks` extra -----------------------------
# (the task registry and metrics for sampler, grader and learner; for the executor the ML stack the
# agent's scripts import in its local sandbox: numpy, pandas, scikit-learn, scipy, pillow)
FROM ${PYTHON_IMAGE} AS core
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# pip reads this file only where it exists: deploy/wheels/ is an (empty, git-ignored) wheelhouse that
# a build host may fill with wheels to take before PyPI's (a CPU torch), their constraints and a CA
# bundle (deploy/wheels/README.md). It is bind-mounted for the install steps only, never copied.
ARG PIP_CONFIG_FILE=/wheels/pip.conf
# without the setuptools that venv seeds: nothing at run time needs it, builds get their own, and a
# service that needs a newer one (torch's dependencies do) then adds it instead of replacing files
RUN python3 -m venv /opt/treegrpo && /opt/treegrpo/bin/pip uninstall -q -y setuptools
WORKDIR /src
COPY deploy/docker/venv_delta.py /usr/local/lib/venv_delta.py
COPY pyproject.toml README.md ./
COPY treegrpo ./treegrpo
# pip's download cache lives in the builder (a cache mount), not in a layer
RUN --mount=type=bind,source=deploy/wheels,target=/wheels \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    /opt/treegrpo/bin/pip install ".[tasks]" \
 && python3 /usr/local/lib/venv_delta.py slim /opt/treegrpo \
 && python3 /usr/local/lib/venv_delta.py snapshot /opt/treegrpo /core.manifest

# ---- shared: packages two images have in common, in a layer they share -------------------------------
FROM core AS shared
ARG PIP_CONFIG_FILE=/wheels/pip.conf
# e.g. the sampler's and the learner's torch + transformers: the same list (compose.yaml's
# x-torch-packages), a subset of what both services declare, so the layer is built once and stored once
ARG SHARED_PACKAGES=""
RUN --mount=type=bind,source=deploy/wheels,target=/wheels \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    if [ -n "${SHARED_PACKAGES}" ]; then /opt/treegrpo/bin/pip install ${SHARED_PACKAGES}; fi \
 && python3 /usr/local/lib/venv_delta.py slim /opt/treegrpo \
 && python3 /usr/local/lib/venv_delta.py diff /opt/treegrpo /core.manifest /shared-delta /shared.manifest

# ---- build: the one service on top; only the files it adds to the environment are kept (/delta) -----
FROM shared AS build
ARG PIP_CONFIG_FILE=/wheels/pip.conf
ARG SERVICE
# The service's extras, e.g. "[hf,openai]" for the sampler's in-process backends.
ARG SERVICE_EXTRAS=""
# Extra packages on top, e.g. more of an ML stack for the executor's local sandbox ("lightgbm"), or
# "vllm==<version>" for a GPU sampler.
ARG EXTRA_PACKAGES=""
# Folders under site-packages the service never imports, left out of its layer (venv_delta.py slim),
# e.g. "kubernetes/aio" for the executor: the client's asyncio twin, half of its 128 MB.
ARG SLIM_PATHS=""
RUN case "${SERVICE}" in sampler|executor|grader|learner) ;; \
      *) echo "build with --build-arg SERVICE=sampler|executor|grader|learner" >&2; exit 1;; esac
COPY services/${SERVICE} ./services/${SERVICE}
RUN --mount=type=bind,source=deploy/wheels,target=/wheels \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    /opt/treegrpo/bin/pip install "./services/${SERVICE}${SERVICE_EXTRAS}" ${EXTRA_PACKAGES} \
 && python3 /usr/local/lib/venv_delta.py slim /opt/treegrpo ${SLIM_PATHS} \
 && /opt/treegrpo/bin/treegrpo serve "${SERVICE}" --help >/dev/null \
 && python3 /usr/local/lib/venv_delta.py diff /opt/treegrpo /shared.manifest /delta

# ---- runtime: the venv, a non-root user, no compilers, no source tree ------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 treegrpo \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/treegrpo --create-home \
            --shell /usr/sbin/nologin treegrpo \
 && install -d -o 10001 -g 10001 /var/lib/treegrpo/tasks /var/lib/treegrpo/tasks/public \
                                  /var/lib/treegrpo/tasks/private /var/lib/treegrpo/traces
# (a fresh volume mounted on one of these folders takes its owner, so the grader can write there)
COPY --from=core /opt/treegrpo /opt/treegrpo
COPY --from=shared /shared-delta/ /
ARG SERVICE
COPY --from=build /delta/ /
LABEL org.opencontainers.image.title="treegrpo-${SERVICE}" \
      org.opencontainers.image.description="treegrpo ${SERVICE} service (treegrpo serve ${SERVICE})"
ENV PATH=/opt/treegrpo/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TREEGRPO_HOME=/var/lib/treegrpo \
    TREEGRPO_SERVICE=${SERVICE}
USER 10001:10001
WORKDIR /var/lib/treegrpo
ENTRYPOINT ["treegrpo"]
CMD ["--help"]
