# syntax=docker/dockerfile:1.7
# One image per service: the core distribution (treegrpo) plus one service's (services/<name>/), each
# with only the dependencies it declares:
#   docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=grader -t treegrpo/grader:0.1.0 .
# (docker compose -f deploy/compose.yaml build does this for all four.)
#
# The base is pinned to an exact Python and Debian release. Its digest could not be checked here
# (no registry access besides PyPI/Debian/npm); pin it yourself with
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm
# and --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:<digest>.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ---- build: a virtual environment holding treegrpo + treegrpo-<service> and nothing else -----------
FROM ${PYTHON_IMAGE} AS build
ARG SERVICE
# The service's extras, e.g. "[hf,openai]" for the sampler's in-process backends.
ARG SERVICE_EXTRAS=""
# Extra packages on top, e.g. the ML stack the executor's local sandbox gives scripts
# ("numpy pandas scikit-learn pillow"), or "vllm==<version>" for a GPU sampler.
ARG EXTRA_PACKAGES=""
RUN case "${SERVICE}" in sampler|executor|grader|learner) ;; \
      *) echo "build with --build-arg SERVICE=sampler|executor|grader|learner" >&2; exit 1;; esac
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/treegrpo
WORKDIR /src
# The core first: the same layer in all four images, so they share it. Then the one service.
COPY pyproject.toml README.md ./
COPY treegrpo ./treegrpo
RUN /opt/treegrpo/bin/pip install .
COPY services/${SERVICE} ./services/${SERVICE}
RUN /opt/treegrpo/bin/pip install "./services/${SERVICE}${SERVICE_EXTRAS}" ${EXTRA_PACKAGES} \
 && /opt/treegrpo/bin/treegrpo serve "${SERVICE}" --help >/dev/null

# ---- runtime: the venv, a non-root user, no compilers, no source tree ------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ARG SERVICE
LABEL org.opencontainers.image.title="treegrpo-${SERVICE}" \
      org.opencontainers.image.description="treegrpo ${SERVICE} service (treegrpo serve ${SERVICE})"
RUN groupadd --system --gid 10001 treegrpo \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/treegrpo --create-home \
            --shell /usr/sbin/nologin treegrpo \
 && install -d -o 10001 -g 10001 /var/lib/treegrpo/tasks
# (a fresh volume mounted on tasks/ takes this folder's owner, so the grader can write there)
COPY --from=build /opt/treegrpo /opt/treegrpo
ENV PATH=/opt/treegrpo/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TREEGRPO_HOME=/var/lib/treegrpo \
    TREEGRPO_SERVICE=${SERVICE}
USER 10001:10001
WORKDIR /var/lib/treegrpo
ENTRYPOINT ["treegrpo"]
CMD ["--help"]
