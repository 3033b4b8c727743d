#!/usr/bin/env bash
# The container engine for the compose dev stack on a Debian host without Docker: podman + runc from
# Debian's packages, debootstrap for the local base image (scripts/stack_images.py). Idempotent.
#   sudo bash scripts/stack_host.sh        (make stack-test runs it)
#
# Two settings this host needs (docs/DEPLOY.md, "Without Docker: podman"), written as a drop-in of
# their own so an existing /etc/containers/containers.conf is left as it is:
# - runtime = "runc": crun, podman's default, refuses hybrid cgroups ("cgroups in hybrid mode not
#   supported"); runc runs them;
# - default_ulimits = []: podman's default nofile/nproc ulimits fail with "setrlimit: Operation not
#   permitted" where the host's own limits are lower; containers then inherit the host's;
# - network_backend = "netavark": its aardvark-dns lets containers find each other by service name
#   (compose's `nats:4222`); the CNI backend without the dnsname plugin resolves no names.
set -euo pipefail

DROPIN=/etc/containers/containers.conf.d/50-treegrpo-stack.conf
PACKAGES=(podman runc netavark aardvark-dns catatonit debootstrap iptables)

if [ "$(id -u)" != 0 ]; then
  echo "stack_host.sh: needs root (apt-get, rootful podman)" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # no recommends: crun (refuses this host's cgroups), buildah, fuse-overlayfs and slirp4netns are
  # for rootless use; runc is named explicitly; catatonit is the pause process of `podman kube play`
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$(dirname "$DROPIN")"
want=$'# written by treegrpo scripts/stack_host.sh (docs/DEPLOY.md)\n[containers]\ndefault_ulimits = []\n\n[network]\nnetwork_backend = "netavark"\n\n[engine]\nruntime = "runc"'
if [ ! -f "$DROPIN" ] || [ "$(cat "$DROPIN")" != "$want" ]; then
  printf '%s\n' "$want" >"$DROPIN"
  echo "== wrote $DROPIN"
fi

podman info --format '{{.Host.OCIRuntime.Name}}, network {{.Host.NetworkBackend}}, podman {{.Version.Version}}, cgroups {{.Host.CgroupsVersion}}' |
  sed 's/^/== podman: runtime /'
